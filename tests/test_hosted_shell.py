"""The shell run here (`environment` `container_auto` / `container_reference`): commands run in bash in the
response's container, beside the code interpreter's python and its /mnt/data, and their output streams
while they run. On both sandbox backends, against real kernels, through the openai SDK."""

from __future__ import annotations

import base64
import io
import json
import os
import random
import threading
import time
import zipfile
from typing import Any, Iterator

import openai
import pytest

from sandbox.channel import ShellEnd, ShellOutput
from sandbox.shell_output import CharacterLimit

from .conftest import MODEL, Gateway, Process, emulator_stats, gateway_config, sandbox_section, stream_sdk
from .helpers import items_of
from .test_skills import MANIFEST, SCRIPT, zipped

AUTO = {"type": "shell", "environment": {"type": "container_auto"}}
PYTHON = {"type": "code_interpreter", "container": {"type": "auto"}}


def run(commands: list[str], **limits: Any) -> str:
    return f"[[call shell.exec {json.dumps({'commands': commands, **limits})}]]"


@pytest.fixture(scope="module", params=["docker", "local"])
def hosted(request: pytest.FixtureRequest, emulator: Process, tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Iterator[Gateway]:
    backend = request.param
    workdir = tmp_path_factory.mktemp(f"shell-{backend}")
    instance = f"shell-{os.getpid()}-{backend}"
    keys = [{"key": "alice-key", "tenant": "alice"}, {"key": "bob-key", "tenant": "bob"}]
    sandbox = sandbox_section(backend, instance, timeout_s=5, max_output_bytes=2048)
    process = Gateway(gateway_config(emulator.url, workdir, sandbox=sandbox, auth={"api_keys": keys}), workdir).start()
    process.backend = backend  # type: ignore[attr-defined]
    yield process
    process.stop()


def test_the_shell_reads_what_python_wrote_and_streams_as_it_runs(hosted: Gateway, emulator: Process) -> None:
    client = hosted.client(api_key="alice-key")
    code = "open('/mnt/data/notes.txt', 'w').write('written by python\\n')"
    ask = f"[[python {code}]] {run(['cat notes.txt', 'echo oops >&2; exit 3', 'printf shell > from_shell.txt'])} [[python print(open('/mnt/data/from_shell.txt').read())]]"
    events = stream_sdk(client, input=ask, tools=[PYTHON, AUTO], include=["code_interpreter_call.outputs"])
    response = events[-1]["response"]
    assert response["status"] == "completed", response
    python_calls = items_of(response, "code_interpreter_call")
    (shell_call,) = items_of(response, "shell_call")
    (result,) = items_of(response, "shell_call_output")
    # One container: the conversation's, shared by python and the shell.
    assert shell_call["environment"] == {"type": "container_reference", "container_id": python_calls[0]["container_id"]}
    assert shell_call["status"] == "completed" and result["call_id"] == shell_call["call_id"]
    assert result["output"] == [
        {"stdout": "written by python\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
        {"stdout": "", "stderr": "oops\n", "outcome": {"type": "exit", "exit_code": 3}},
        {"stdout": "", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
    ]
    assert python_calls[1]["outputs"][0]["logs"] == "shell"  # and python reads what the shell wrote
    # In order: the call whole, then its output item, each command's output streamed, then done.
    on_result = [event for event in events if event.get("item_id") == result["id"] or event.get("item", {}).get("id") == result["id"]]
    assert [event["type"] for event in on_result] == [
        "response.output_item.added",
        "response.shell_call_output_content.delta",
        "response.shell_call_output_content.delta",
        "response.shell_call_output_content.done",
        "response.shell_call_output_content.done",
        "response.shell_call_output_content.done",
        "response.output_item.done",
    ]
    deltas = [(event["command_index"], event["delta"]) for event in on_result if event["type"].endswith(".delta")]
    assert deltas == [(0, {"stdout": "written by python\n"}), (1, {"stderr": "oops\n"})]
    types = [event["type"] for event in events]
    assert types.index("response.shell_call_command.done") < types.index("response.shell_call_output_content.delta")
    # The model read the output as it is declared to, through Harmony.
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace shell {" in prompt and "sandboxed Linux container" in prompt
    told = "[command 1: exit code 0]\nwritten by python\n[command 2: exit code 3]\n[stderr]\noops\n[command 3: exit code 0]"
    assert f"<|start|>shell.exec to=assistant<|channel|>commentary<|message|>{told}<|end|>" in prompt, prompt[-600:]


def test_a_commands_output_arrives_while_it_still_runs(hosted: Gateway) -> None:
    """What a command writes reaches the client as it is written, not when the command ends: the first
    line's delta comes seconds before the second line's, the command sleeping between them."""
    client = hosted.client(api_key="alice-key")
    arrived: dict[str, float] = {}
    with client.responses.stream(model=MODEL, input=run(["echo first; sleep 2; echo second"]), tools=[AUTO]) as stream:
        for event in stream:
            if event.type == "response.shell_call_output_content.delta":
                for line in (event.delta.stdout or "").split():  # type: ignore[union-attr]
                    arrived.setdefault(line, time.monotonic())
    assert set(arrived) == {"first", "second"}
    assert arrived["second"] - arrived["first"] > 1.5, arrived


def test_a_file_the_shell_wrote_is_cited_where_the_answer_links_it(hosted: Gateway) -> None:
    """With the hosted shell alone (no python), a link to a file its container has is a container_file_citation."""
    client = hosted.client(api_key="alice-key")
    answer = "Written: sandbox:/mnt/data/out.txt."
    events = stream_sdk(client, input=f"{run(['printf done > out.txt'])} [[answer {answer}]]", tools=[AUTO])
    response = events[-1]["response"]
    assert response["status"] == "completed", response
    (shell_call,) = items_of(response, "shell_call")
    (part,) = items_of(response, "message")[-1]["content"]
    (citation,) = part["annotations"]
    assert citation["type"] == "container_file_citation" and citation["filename"] == "out.txt"
    assert citation["container_id"] == shell_call["environment"]["container_id"]
    assert part["text"][citation["start_index"] : citation["end_index"]] == "sandbox:/mnt/data/out.txt"


@pytest.mark.parametrize("length", [1, 50, 239, 240, 300, 9000])
def test_max_output_length_keeps_exactly_the_limit(length: int) -> None:
    """At exactly `max_output_length` characters nothing is cut; one more and the command returns exactly
    the limit, its note included (where there is room for one)."""
    exact = "é" * length  # characters, not bytes
    assert CharacterLimit(length).end(ShellEnd(0, exact, "")).stdout == exact
    over = CharacterLimit(length).end(ShellEnd(0, exact + "x", "")).stdout
    assert len(over) == length and ("output truncated" in over) == (length >= 240)
    live = CharacterLimit(length)
    sent = [live.live(ShellOutput("stdout", "a" * (length + 5)))]
    assert sent[0] is not None and len(sent[0].text) == live.head and live.live(ShellOutput("stderr", "b")) is None


@pytest.mark.parametrize("seed", range(4))
def test_a_commands_output_is_never_over_its_limit_and_starts_with_what_streamed(seed: int) -> None:
    """Random output on both streams, in random lines, against random limits: stdout and stderr together,
    notes included, never pass the limit; what streamed live is the start of each; what fits is whole."""
    rng = random.Random(seed)
    for _ in range(300):
        length = rng.choice([rng.randint(0, 300), rng.randint(0, 5000)])
        limit = CharacterLimit(length)
        written: dict[str, list[str]] = {"stdout": [], "stderr": []}
        live: dict[str, list[str]] = {"stdout": [], "stderr": []}
        for _ in range(rng.randint(0, 12)):
            stream = rng.choice(["stdout", "stderr"])
            line = rng.choice("aé🙂\n") * rng.randint(0, 700)
            written[stream].append(line)
            shown = limit.live(ShellOutput(stream, line))  # type: ignore[arg-type]
            if shown is not None:
                live[stream].append(shown.text)
        out, err = "".join(written["stdout"]), "".join(written["stderr"])
        ended = limit.end(ShellEnd(0, out, err))
        assert len(ended.stdout) + len(ended.stderr) <= length
        assert ended.stdout.startswith("".join(live["stdout"])) and ended.stderr.startswith("".join(live["stderr"]))
        if len(out) + len(err) <= length:
            assert (ended.stdout, ended.stderr) == (out, err)


def test_the_commands_stream_while_the_model_writes_them(hosted: Gateway) -> None:
    client = hosted.client(api_key="alice-key")
    first = "echo " + " ".join(f"word{number}" for number in range(40))
    events = stream_sdk(client, input=run([first, "echo two"]) + ' [[call shell.exec {"commands": 7}]]', tools=[AUTO])
    kinds = [(event["type"], event.get("command_index")) for event in events]
    deltas = [event["delta"] for event in events if event["type"] == "response.shell_call_command.delta" and event["command_index"] == 0]
    assert len(deltas) > 1 and "".join(deltas) == first  # token by token, as the model wrote it
    assert kinds.index(("response.shell_call_command.done", 0)) < kinds.index(("response.shell_call_command.added", 1))
    calls = items_of(events[-1]["response"], "shell_call")
    assert [call["status"] for call in calls] == ["completed", "incomplete"]  # the second call's arguments were not valid
    assert calls[1]["action"]["commands"] == [] and len(items_of(events[-1]["response"], "shell_call_output")) == 1


def test_a_command_that_runs_too_long_and_one_that_writes_too_much(hosted: Gateway) -> None:
    client = hosted.client(api_key="alice-key")
    wide = "python3 -c \"print('é' * 1000, end='')\""  # 2 bytes a character: the limit counts characters
    ask = run(["sleep 30", "seq 1 200000", "echo after", wide], timeout_ms=500, max_output_length=300)
    events = stream_sdk(client, input=ask, tools=[AUTO])
    (result,) = items_of(events[-1]["response"], "shell_call_output")
    slow, loud, after, accents = result["output"]
    assert len(accents["stdout"]) == 300 and "\n[... output truncated: 2000 bytes written in all ...]\n" in accents["stdout"]
    live = [
        event["delta"].get("stdout", "")
        for event in events
        if event["type"] == "response.shell_call_output_content.delta" and event["command_index"] == 3
    ]
    assert "".join(live) == "é" * 105 and accents["stdout"].startswith("".join(live))  # the head that is kept, as it arrived
    assert slow["outcome"] == {"type": "timeout"}
    assert loud["outcome"] == {"type": "exit", "exit_code": 0} and len(loud["stdout"]) == 300
    assert loud["stdout"].startswith("1\n2\n3\n") and "output truncated" in loud["stdout"] and loud["stdout"].endswith("200000\n")
    assert after["stdout"] == "after\n"
    assert result["max_output_length"] == 300


def test_another_tenants_container_is_not_found(hosted: Gateway) -> None:
    alice, bob = hosted.client(api_key="alice-key"), hosted.client(api_key="bob-key")
    container = alice.containers.create(name="alice's")
    mine = {"type": "shell", "environment": {"type": "container_reference", "container_id": container.id}}
    response = alice.responses.create(model=MODEL, input=run(["echo hi > hi.txt", "ls"]), tools=[mine])
    assert items_of(response.model_dump(), "shell_call_output")[0]["output"][1]["stdout"] == "hi.txt\n"
    assert [file.path for file in alice.containers.files.list(container.id)] == ["/mnt/data/hi.txt"]
    with pytest.raises(openai.NotFoundError) as raised:
        bob.responses.create(model=MODEL, input=run(["ls"]), tools=[mine])
    assert raised.value.body["param"] == "tools[0].environment"  # type: ignore[index]


@pytest.mark.parametrize(
    ("environment", "param"),
    [
        (
            {"type": "container_auto", "network_policy": {"type": "allowlist", "allowed_domains": ["pypi.org"]}},
            "tools[0].environment.network_policy.type",
        ),
        ({"type": "container_auto", "skills": [{"type": "skill_reference", "skill_id": "skill_1"}]}, "tools[0].environment.skills[0].skill_id"),
        ({"type": "container_auto", "memory_limit": "64g"}, "tools[0].environment.memory_limit"),
        ({"type": "container_auto", "file_ids": ["file_nope"]}, "tools[0].environment.file_ids[0]"),
    ],
)
def test_what_the_hosted_shell_cannot_do_is_refused_by_name(hosted: Gateway, environment: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.APIStatusError) as raised:
        hosted.client(api_key="alice-key").responses.create(model=MODEL, input="hi", tools=[{"type": "shell", "environment": environment}])
    assert raised.value.status_code in (400, 404) and raised.value.body["param"] == param  # type: ignore[index]


def test_without_a_sandbox_the_hosted_shell_is_refused(gateway: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        gateway.client().responses.create(model=MODEL, input="hi", tools=[AUTO])
    assert raised.value.param == "tools[0].environment.type" and "local" in raised.value.message


def test_skills_are_installed_read_only_and_listed_for_the_model(hosted: Gateway, emulator: Process) -> None:
    client = hosted.client(api_key="alice-key")
    skill = client.skills.create(files=("pdf-forms.zip", zipped({"SKILL.md": MANIFEST, "scripts/fill.py": SCRIPT})))
    notes = b"---\nname: meeting-notes\ndescription: Write meeting notes.\n---\nUse headings.\n"
    inline = {
        "type": "inline",
        "name": "meeting-notes",
        "description": "Write meeting notes.",
        "source": {"type": "base64", "media_type": "application/zip", "data": base64.b64encode(zipped({"SKILL.md": notes})).decode()},
    }
    environment = {"type": "container_auto", "skills": [{"type": "skill_reference", "skill_id": skill.id}, inline]}
    tool = {"type": "shell", "environment": environment}
    commands = [
        "cat /mnt/skills/pdf-forms/SKILL.md",
        "python3 /mnt/skills/pdf-forms/scripts/fill.py",
        "cat /mnt/skills/meeting-notes/SKILL.md",
        "echo x > /mnt/skills/pdf-forms/planted.txt",
        "rm /mnt/skills/pdf-forms/SKILL.md",
    ]
    response = client.responses.create(model=MODEL, input=run(commands), tools=[tool])
    (result,) = items_of(response.model_dump(), "shell_call_output")
    manifest, fill, meeting, planted, removed = result["output"]
    assert manifest["stdout"] == MANIFEST.decode() and fill["stdout"] == "filled\n" and meeting["stdout"] == notes.decode()
    assert planted["outcome"]["exit_code"] != 0 and removed["outcome"]["exit_code"] != 0  # read-only
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "- pdf-forms: Fill in PDF forms from a template. (read /mnt/skills/pdf-forms/SKILL.md before using it)" in prompt
    assert "- meeting-notes: Write meeting notes. (read /mnt/skills/meeting-notes/SKILL.md before using it)" in prompt
    # A new default version is what the next response's container holds.
    client.skills.versions.create(
        skill.id, files=[("SKILL.md", MANIFEST.replace(b"# Filling", b"# Filling, v2")), ("scripts/fill.py", SCRIPT)], default=True
    )
    again = client.responses.create(
        model=MODEL, previous_response_id=response.id, input=run(["grep -c v2 /mnt/skills/pdf-forms/SKILL.md"]), tools=[tool]
    )
    assert items_of(again.model_dump(), "shell_call_output")[0]["output"][0]["stdout"] == "1\n"
    # Another tenant cannot name it; an inline bundle that is not a skill is a 400 naming it.
    with pytest.raises(openai.NotFoundError):
        hosted.client(api_key="bob-key").responses.create(model=MODEL, input="hi", tools=[tool])
    bad = inline | {"source": inline["source"] | {"data": base64.b64encode(zipped({"README.md": b"x"})).decode()}}  # type: ignore[operator]
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=MODEL, input="hi", tools=[{"type": "shell", "environment": {"type": "container_auto", "skills": [bad]}}])
    assert raised.value.param == "tools[0].environment.skills[0].source.data"


def inline_skill(data: bytes) -> dict[str, Any]:
    return {
        "type": "inline",
        "name": "x",
        "description": "x",
        "source": {"type": "base64", "media_type": "application/zip", "data": base64.b64encode(data).decode()},
    }


def test_skill_bundles_are_checked_from_their_directory_before_unpacking(hosted: Gateway) -> None:
    """A bzip2 bomb (11 KB that unpacks to 20 MB), a bundle declaring more than a skill may hold, and one
    whose paths collide are each a 400 naming the skill, in a request and as an upload."""
    client = hosted.client(api_key="alice-key")
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_BZIP2) as archive:
        archive.writestr("SKILL.md", MANIFEST)
        archive.writestr("zeros.bin", bytes(20_000_000))
    assert len(bomb.getvalue()) < 20_000
    large = zipped({"SKILL.md": MANIFEST, "zeros.bin": bytes(9 * 1024 * 1024)})
    collide = zipped({"SKILL.md": MANIFEST, "x": b"a file", "x/y": b"and a file in x"})
    for data, says in [
        (bomb.getvalue(), "only stored and deflate"),
        (large, "more than 8388608 bytes"),
        (collide, "'x' is both a file and a folder"),
    ]:
        with pytest.raises(openai.BadRequestError) as raised:
            client.skills.create(files=("bundle.zip", data))
        assert says in raised.value.message
        if len(data) > 3000:  # its base64, one unbroken run, is refused before any skill is read
            continue
        tool = {"type": "shell", "environment": {"type": "container_auto", "skills": [inline_skill(data)]}}
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(model=MODEL, input="hi", tools=[tool])
        assert raised.value.param == "tools[0].environment.skills[0].source.data" and says in raised.value.message, raised.value.message


def test_stored_skills_are_installed_without_being_unpacked_in_memory(hosted: Gateway) -> None:
    """Five stored skills of 7.5 MB each, zipped to a few KB: naming all five is past what one request may
    install; four requests naming four each, at once, install them in their containers while the
    gateway's peak memory stays far below what they unpack to, and another tenant's responses go on."""
    if hosted.backend != "local":  # type: ignore[attr-defined]
        pytest.skip("one backend is enough to measure the gateway's memory")
    alice, bob = hosted.client(api_key="alice-key"), hosted.client(api_key="bob-key")
    skills = []
    for number in range(5):
        manifest = MANIFEST.replace(b"name: pdf-forms", f"name: big-{number}".encode())
        skills.append(alice.skills.create(files=(f"big-{number}.zip", zipped({"SKILL.md": manifest, "zeros.bin": bytes(7_500_000)}))).id)
    tool = {"type": "shell", "environment": {"type": "container_auto", "skills": [{"type": "skill_reference", "skill_id": each} for each in skills]}}
    with pytest.raises(openai.BadRequestError) as raised:
        alice.responses.create(model=MODEL, input="hi", tools=[tool])
    assert raised.value.code == "skills_too_large" and raised.value.param == "tools[0].environment.skills[4]"
    four = {"type": "shell", "environment": tool["environment"] | {"skills": tool["environment"]["skills"][:4]}}  # type: ignore[index]
    before = hosted.peak_rss_bytes()
    results: list[Any] = []

    def install() -> None:
        results.append(alice.responses.create(model=MODEL, input=run(["du -sb /mnt/skills | cut -f1"]), tools=[four]))

    threads = [threading.Thread(target=install) for _ in range(4)]
    for thread in threads:
        thread.start()
    latencies = []
    while any(thread.is_alive() for thread in threads):
        started = time.monotonic()
        assert bob.responses.create(model=MODEL, input="still here?").status == "completed"
        latencies.append(time.monotonic() - started)
    for thread in threads:
        thread.join()
    assert len(results) == 4
    for response in results:
        (result,) = items_of(response.model_dump(), "shell_call_output")
        assert int(result["output"][0]["stdout"]) > 30_000_000  # all four skills, whole, in the container
    grown = hosted.peak_rss_bytes() - before
    # Measured: 215 MB when each request unpacked its skills in memory; ~80 MB streamed (four copies in flight
    # at once, each a 2 MiB chunk and its base64 and JSON encodings), whatever the skills weigh.
    assert grown < 120_000_000, grown
    assert max(latencies) < 3, latencies


def test_the_whole_thread_sent_back_after_a_hosted_shell_is_read(hosted: Gateway, emulator: Process) -> None:
    """A client that keeps no server state sends the response's output back as input, as the SDK types
    dump it (shell_call, shell_call_output, code_interpreter_call, reasoning, message): every item is read,
    with what the model saw: the commands and their output."""
    client = hosted.client(api_key="alice-key")
    first = client.responses.create(
        model=MODEL,
        input=f"[[python print(6 * 7)]] {run(['echo from-the-shell'])}",
        tools=[PYTHON, AUTO],
        include=["code_interpreter_call.outputs"],
        store=False,
    )
    assert [item.type for item in first.output if item.type.endswith("call") or item.type.endswith("output")] == [
        "code_interpreter_call", "shell_call", "shell_call_output",
    ]  # fmt: skip
    thread = [
        {"role": "user", "content": "first"},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"role": "user", "content": "and then?"},
    ]
    again = client.responses.create(model=MODEL, input=thread, tools=[PYTHON, AUTO], store=False)
    assert again.status == "completed" and again.output_text == "You said: and then?"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "from-the-shell" in prompt and "echo from-the-shell" in prompt and "42" in prompt
