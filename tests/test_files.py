"""Files in and out of the code interpreter, through the openai SDK: the Files API, the Containers API,
`container.file_ids`, files the code writes becoming container files cited in the answer, and
`input_file` parts. On both sandbox backends, against real kernels."""

from __future__ import annotations

import base64
import csv
import io
import os
import re
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest

from .conftest import MODEL, Gateway, Process, emulator_stats, gateway_config, sandbox_section, stream_sdk

CSV = "city,temp\nOslo,4\nLima,19\nCairo,27\nOslo,6\n"
# The model's code: read the upload, write the mean temperature per city, say what it wrote.
CLEAN = (
    "import csv\n"
    "rows = list(csv.DictReader(open('/mnt/data/temps.csv')))\n"
    "by = {}\n"
    "for r in rows: by.setdefault(r['city'], []).append(float(r['temp']))\n"
    "with open('/mnt/data/means.csv', 'w', newline='') as f:\n"
    "    w = csv.writer(f); w.writerow(['city', 'mean'])\n"
    "    [w.writerow([c, sum(v) / len(v)]) for c, v in sorted(by.items())]\n"
    "print(len(rows), 'rows')"
)
ANSWER = "Done: [the means](sandbox:/mnt/data/means.csv)."


def expected_means() -> bytes:
    by: dict[str, list[float]] = {}
    for row in csv.DictReader(io.StringIO(CSV)):
        by.setdefault(row["city"], []).append(float(row["temp"]))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["city", "mean"])
    for city, values in sorted(by.items()):
        writer.writerow([city, sum(values) / len(values)])
    return out.getvalue().encode()


@pytest.fixture(scope="module", params=["docker", "local"])
def sandboxed(request: pytest.FixtureRequest, emulator: Process, tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Iterator[Gateway]:
    backend = request.param
    workdir = tmp_path_factory.mktemp(f"files-{backend}")
    instance = f"files-{os.getpid()}-{backend}"
    files = {"max_container_bytes": 200_000, "max_file_bytes": 150_000}
    config = gateway_config(emulator.url, workdir, sandbox=sandbox_section(backend, instance), files=files)
    process = Gateway(config, workdir).start()
    process.workdir = workdir  # type: ignore[attr-defined]
    yield process
    process.stop()


def message(response: dict[str, Any]) -> dict[str, Any]:
    return response["output"][-1]["content"][0]


def test_a_csv_in_and_the_result_out_with_its_citation(sandboxed: Gateway, emulator: Process) -> None:
    client = sandboxed.client()
    upload = client.files.create(file=("temps.csv", CSV.encode()), purpose="user_data")
    tool = {"type": "code_interpreter", "container": {"type": "auto", "file_ids": [upload.id]}}
    events = stream_sdk(client, input=f"[[python {CLEAN}]] [[answer {ANSWER}]]", tools=[tool], include=["code_interpreter_call.outputs"])
    response = events[-1]["response"]
    assert response["status"] == "completed", response
    call = next(item for item in response["output"] if item["type"] == "code_interpreter_call")
    assert call["outputs"][0]["logs"] == "4 rows"
    # The tool's description named the file for the model.
    assert "/mnt/data/temps.csv" in emulator_stats(emulator)["last_prompt"]
    part = message(response)
    assert part["text"] == ANSWER
    (citation,) = part["annotations"]
    assert citation["type"] == "container_file_citation" and citation["filename"] == "means.csv"
    assert citation["container_id"] == call["container_id"]
    assert part["text"][citation["start_index"] : citation["end_index"]] == "sandbox:/mnt/data/means.csv"
    # Announced as OpenAI does: after the message's last delta, before its text is done.
    kinds = [event["type"] for event in events if event.get("item_id") == response["output"][-1]["id"]]
    assert kinds.index("response.output_text.annotation.added") == kinds.index("response.output_text.done") - 1
    # The file the code wrote, downloaded byte for byte.
    content = client.containers.files.content.retrieve(citation["file_id"], container_id=citation["container_id"])
    assert content.read() == expected_means()
    listed = {file.path: file.source for file in client.containers.files.list(call["container_id"])}
    assert listed == {"/mnt/data/temps.csv": "user", "/mnt/data/means.csv": "assistant"}
    assert client.containers.retrieve(call["container_id"]).status == "running"


def test_a_container_made_through_the_api(sandboxed: Gateway) -> None:
    client = sandboxed.client()
    upload = client.files.create(file=("temps.csv", CSV.encode()), purpose="assistants")
    container = client.containers.create(name="analysis", file_ids=[upload.id], expires_after={"anchor": "last_active_at", "minutes": 5})
    assert container.expires_after is not None and container.expires_after.minutes == 5
    client.containers.files.create(container.id, file=("extra.txt", b"more data"))
    tool = {"type": "code_interpreter", "container": container.id}
    code = "import os; print(sorted(os.listdir('/mnt/data')), open('/mnt/data/extra.txt').read())"
    response = client.responses.create(model=MODEL, input=f"[[python {code}]]", tools=[tool], include=["code_interpreter_call.outputs"])
    call = next(item for item in response.output if item.type == "code_interpreter_call")
    assert call.container_id == container.id
    assert call.outputs[0].logs == "['extra.txt', 'temps.csv'] more data"
    # A file deleted through the API is gone from the session at its next call.
    extra = next(file for file in client.containers.files.list(container.id) if file.path.endswith("extra.txt"))
    client.containers.files.delete(extra.id, container_id=container.id)
    response = client.responses.create(
        model=MODEL, input="[[python print(sorted(os.listdir('/mnt/data')))]]", tools=[tool], include=["code_interpreter_call.outputs"]
    )
    call = next(item for item in response.output if item.type == "code_interpreter_call")
    assert call.outputs[0].logs == "['temps.csv']"
    # Deleted, the container is not found any more.
    client.containers.delete(container.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL, input="[[python 1]]", tools=[tool])
    with pytest.raises(openai.NotFoundError):
        client.containers.retrieve(container.id)


def test_an_expired_container_is_a_404_that_says_so(sandboxed: Gateway) -> None:
    client = sandboxed.client()
    container = client.containers.create(name="short", expires_after={"anchor": "last_active_at", "minutes": 1})
    with sqlite3.connect(sandboxed.workdir / "responses.sqlite3") as db:  # type: ignore[attr-defined]
        db.execute("UPDATE containers SET last_active_at = last_active_at - 120 WHERE id = ?", (container.id,))
    assert client.containers.retrieve(container.id).status == "expired"
    tool = {"type": "code_interpreter", "container": container.id}
    with pytest.raises(openai.NotFoundError) as raised:
        client.responses.create(model=MODEL, input="[[python 1]]", tools=[tool])
    assert "expired" in raised.value.message and "Create a new container" in raised.value.message
    with pytest.raises(openai.NotFoundError):
        client.containers.files.create(container.id, file=("x.txt", b"x"))


def test_what_the_code_leaves_that_is_not_a_file_is_not_taken(sandboxed: Gateway) -> None:
    """Links (to the kernel's own descriptors, or out of /mnt/data), FIFOs and files too large are not
    copied out; the response ends normally and the model is told what was not kept."""
    client = sandboxed.client()
    code = (
        "import os; os.symlink('/proc/self/fd/1', '/mnt/data/channel'); os.symlink('/etc', '/mnt/data/etc');"
        " os.mkfifo('/mnt/data/pipe'); open('/mnt/data/big.bin', 'wb').write(b'x' * 160000);"
        " open('/mnt/data/ok.txt', 'w').write('fine'); print('made')"
    )
    tool = {"type": "code_interpreter", "container": {"type": "auto"}}
    response = client.responses.create(model=MODEL, input=f"[[python {code}]]", tools=[tool], include=["code_interpreter_call.outputs"])
    call = next(item for item in response.output if item.type == "code_interpreter_call")
    assert call.outputs[0].logs.startswith("made\n[The file /mnt/data/big.bin was not kept:")
    assert [file.path for file in client.containers.files.list(call.container_id)] == ["/mnt/data/ok.txt"]


def test_files_the_gateway_cannot_keep_are_skipped_alone(sandboxed: Gateway) -> None:
    """A name that is not UTF-8 and a path over 1024 bytes (the model writes the code: a prompt injection
    chooses the names) are skipped and reported; the other files are kept, and the container still works."""
    client = sandboxed.client()
    code = (
        "import os; open(b'/mnt/data/\\xff.txt', 'wb').write(b'bad name');"
        " deep = '/mnt/data/' + '/'.join(['d' * 250] * 5); os.makedirs(deep);"
        " open(deep + '/long.txt', 'w').write('deep'); open('/mnt/data/result.csv', 'w').write('a,b'); print('made')"
    )
    tool = {"type": "code_interpreter", "container": {"type": "auto"}}
    response = client.responses.create(model=MODEL, input=f"[[python {code}]]", tools=[tool], include=["code_interpreter_call.outputs"])
    assert response.status == "completed"
    call = next(item for item in response.output if item.type == "code_interpreter_call")
    logs = call.outputs[0].logs
    assert logs.startswith("made\n") and "\ufffd.txt was not kept: its name is not UTF-8" in logs, logs
    assert "was not kept: its path is longer than 1024 bytes" in logs, logs
    assert [file.path for file in client.containers.files.list(call.container_id)] == ["/mnt/data/result.csv"]
    tool = {"type": "code_interpreter", "container": call.container_id}
    again = client.responses.create(
        model=MODEL, input="[[python print(open('/mnt/data/result.csv').read())]]", tools=[tool], include=["code_interpreter_call.outputs"]
    )
    call = next(item for item in again.output if item.type == "code_interpreter_call")
    assert call.outputs[0].logs == "a,b"  # told once: the bad names are not reported again


def test_a_container_deleted_while_its_code_runs(sandboxed: Gateway) -> None:
    client = sandboxed.client()
    container = client.containers.create(name="doomed")
    tool = {"type": "code_interpreter", "container": container.id}
    code = "import time; time.sleep(1.5); open('/mnt/data/late.txt', 'w').write('x'); print('done')"
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["response"] = client.responses.create(model=MODEL, input=f"[[python {code}]]", tools=[tool])
        except openai.APIError as exc:
            outcome["error"] = exc

    import threading

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.8)
    client.containers.delete(container.id)
    thread.join(30)
    assert "error" not in outcome, outcome
    assert outcome["response"].status == "completed"
    with pytest.raises(openai.NotFoundError):
        client.containers.files.list(container.id)


def test_counting_input_tokens_makes_no_container(sandboxed: Gateway) -> None:
    """`input_tokens` plans the prompt a response would have, files named in the tool's description
    included, and creates nothing: no container, no copied file."""
    client = sandboxed.client()
    upload = client.files.create(file=("counted.csv", CSV.encode()), purpose="user_data")
    tool = {"type": "code_interpreter", "container": {"type": "auto", "file_ids": [upload.id]}}
    before = [container.id for container in client.containers.list()]
    counted = client.responses.input_tokens.count(model=MODEL, input="hi", tools=[tool])  # type: ignore[list-item]
    assert [container.id for container in client.containers.list()] == before
    response = client.responses.create(model=MODEL, input="hi", tools=[tool])  # type: ignore[list-item]
    assert response.usage is not None and counted.input_tokens == response.usage.input_tokens
    assert len([container.id for container in client.containers.list()]) == len(before) + 1


def test_a_container_out_of_space_refuses_the_file_and_keeps_nothing(sandboxed: Gateway) -> None:
    client = sandboxed.client()
    container = client.containers.create(name="small")
    client.containers.files.create(container.id, file=("a.bin", b"a" * 120_000))
    blobs = set(os.listdir(sandboxed.workdir / "files"))  # type: ignore[attr-defined]
    with pytest.raises(openai.BadRequestError) as raised:
        client.containers.files.create(container.id, file=("b.bin", b"b" * 100_000))
    assert raised.value.code == "container_full"
    assert set(os.listdir(sandboxed.workdir / "files")) == blobs  # type: ignore[attr-defined]
    assert [file.path for file in client.containers.files.list(container.id)] == ["/mnt/data/a.bin"]


def test_the_agents_sdk_code_interpreter_tool(sandboxed: Gateway, emulator: Process) -> None:
    from agents import Agent, CodeInterpreterTool, OpenAIResponsesModel, Runner

    client = sandboxed.async_client()
    upload = sandboxed.client().files.create(file=("temps.csv", CSV.encode()), purpose="user_data")
    tool = CodeInterpreterTool(tool_config={"type": "code_interpreter", "container": {"type": "auto", "file_ids": [upload.id]}})
    agent = Agent(name="analyst", tools=[tool], model=OpenAIResponsesModel(MODEL, client))
    result = Runner.run_sync(agent, f"[[python {CLEAN}]] [[answer {ANSWER}]]")
    assert result.final_output == ANSWER
    (citation,) = [a for item in result.raw_responses[-1].output if item.type == "message" for a in item.content[0].annotations]
    assert citation.type == "container_file_citation"
    content = sandboxed.client().containers.files.content.retrieve(citation.file_id, container_id=citation.container_id)
    assert content.read() == expected_means()
    # The next turn sends the whole thread back as the SDK keeps it, the code_interpreter_call included.
    history = result.to_input_list()
    assert "code_interpreter_call" in [item.get("type") for item in history]
    again = Runner.run_sync(agent, [*history, {"role": "user", "content": "and now?"}])
    assert again.final_output == "You said: and now?"
    # The call was read back (its outputs were not asked for, so the model is told they were not sent back).
    assert (
        "<|start|>python to=assistant<|channel|>analysis<|message|>[The output of this call was not sent back.]"
        in emulator_stats(emulator)["last_prompt"]
    )


# -- the Files API and input_file, without a sandbox ------------------------------------------------------------


@pytest.fixture(scope="module")
def filed(emulator: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("files")
    keys = [{"key": "alice-key", "tenant": "alice"}, {"key": "bob-key", "tenant": "bob"}]
    config = gateway_config(
        emulator.url, workdir, auth={"api_keys": keys}, files={"max_file_bytes": 100_000, "tenant_quota_bytes": 150_000, "max_input_file_chars": 1000}
    )
    process = Gateway(config, workdir).start()
    process.workdir = workdir  # type: ignore[attr-defined]
    yield process
    process.stop()


def test_files_api_upload_list_download_delete(filed: Gateway) -> None:
    alice, bob = filed.client(api_key="alice-key"), filed.client(api_key="bob-key")
    data = os.urandom(90_000)
    upload = alice.files.create(file=("blob.bin", data), purpose="assistants", expires_after={"anchor": "created_at", "seconds": 3600})
    assert (upload.bytes, upload.filename, upload.purpose) == (90_000, "blob.bin", "assistants")
    assert upload.expires_at == upload.created_at + 3600
    assert alice.files.content(upload.id).read() == data
    assert alice.files.retrieve(upload.id).id == upload.id
    assert [file.id for file in alice.files.list()] == [upload.id]
    # Another tenant's file is as absent as one that never was.
    assert list(bob.files.list()) == []
    for call in (bob.files.retrieve, bob.files.content, bob.files.delete):
        with pytest.raises(openai.NotFoundError):
            call(upload.id)
    # The quota covers all of a tenant's files: alice has 60 KB left, bob all 150 KB.
    with pytest.raises(openai.APIStatusError) as raised:
        alice.files.create(file=("more.bin", os.urandom(70_000)), purpose="user_data")
    assert raised.value.status_code == 413 and raised.value.code == "storage_quota_exceeded"
    bob.files.create(file=("more.bin", os.urandom(70_000)), purpose="user_data")
    assert alice.files.delete(upload.id).deleted
    with pytest.raises(openai.NotFoundError):
        alice.files.content(upload.id)
    alice.files.create(file=("more.bin", os.urandom(70_000)), purpose="user_data")
    # A download says its size and its name, a name no header can be broken by.
    named = alice.files.create(file=('r\u00e9sum\u00e9 "1"\r\nx: y.txt', b"ten bytes!"), purpose="user_data")
    raw = alice.files.with_raw_response.content(named.id)
    assert raw.content == b"ten bytes!" and raw.headers["content-length"] == "10"
    disposition = raw.headers["content-disposition"]
    fallback, encoded = re.fullmatch(r'attachment; filename="([ !#-\[\]-~]*)"; filename\*=utf-8\'\'([A-Za-z0-9%._~-]+)', disposition).groups()  # type: ignore[union-attr]
    assert urllib.parse.unquote(encoded) == named.filename and fallback.startswith("r_sum_ ")


def test_uploads_that_are_refused_leave_nothing(filed: Gateway) -> None:
    client = filed.client(api_key="alice-key")
    directory: Path = filed.workdir / "files"  # type: ignore[attr-defined]
    before = sorted(os.listdir(directory))
    with pytest.raises(openai.APIStatusError) as raised:
        client.files.create(file=("big.bin", b"x" * 100_001), purpose="user_data")
    assert raised.value.status_code == 413 and raised.value.code == "file_too_large"
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.create(file=("x.jsonl", b"{}"), purpose="batch")
    assert refused.value.param == "purpose"
    headers = {"authorization": "Bearer alice-key"}

    # The size is enforced while the body streams, whatever Content-Length says (here: none).
    def chunks() -> Iterator[bytes]:
        yield b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n'
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n'
        for _ in range(30):
            yield b"y" * 8192
        yield b"\r\n--b--\r\n"

    answer = httpx.post(filed.url + "/v1/files", content=chunks(), headers=headers | {"content-type": "multipart/form-data; boundary=b"})
    assert answer.status_code == 413, answer.text
    malformed = httpx.post(filed.url + "/v1/files", content=b"--b\r\nnonsense", headers=headers | {"content-type": "multipart/form-data; boundary=b"})
    assert malformed.status_code == 400 and malformed.json()["error"]["message"]
    assert httpx.post(filed.url + "/v1/files", json={"purpose": "user_data"}, headers=headers).status_code == 415
    assert sorted(os.listdir(directory)) == before


def test_input_files_become_text_the_model_reads(filed: Gateway, emulator: Process) -> None:
    client = filed.client(api_key="alice-key")
    upload = client.files.create(file=("notes.md", "# Notes\nThe answer is **42**.".encode()), purpose="user_data")
    content = [
        {"type": "input_text", "text": "Summarise:"},
        {"type": "input_file", "file_id": upload.id},
        {"type": "input_file", "filename": "pets.csv", "file_data": "data:text/csv;base64," + base64.b64encode(b"name,kind\nRex,dog\n").decode()},
        {"type": "input_file", "filename": "paper.pdf", "file_data": base64.b64encode(PDF).decode()},
    ]
    response = client.responses.create(model=MODEL, input=[{"role": "user", "content": content}])
    text = response.output_text
    assert "The answer is **42**." in text and "[file notes.md]" in text
    assert "Rex,dog" in text and "Hello from a PDF" in text
    # Items of a conversation are read the same way.
    conversation = client.conversations.create(items=[{"type": "message", "role": "user", "content": [{"type": "input_file", "file_id": upload.id}]}])
    assert "The answer is **42**." in client.responses.create(model=MODEL, conversation=conversation.id, input="[recall]").output_text
    # What gpt-oss cannot read, and what is not there, are 4xx that name the part.
    image = {"type": "input_file", "filename": "cat.png", "file_data": base64.b64encode(b"\x89PNG\r\n\x1a\n\0\0").decode()}
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=MODEL, input=[{"role": "user", "content": [image]}])
    assert raised.value.code == "unsupported_file" and raised.value.param == "input[0].content[0]"
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model=MODEL, input=[{"role": "user", "content": [{"type": "input_file", "file_id": "file_nope"}]}])
    assert missing.value.param == "input[0].content[0].file_id"
    with pytest.raises(openai.BadRequestError) as by_url:
        client.responses.create(model=MODEL, input=[{"role": "user", "content": [{"type": "input_file", "file_url": "https://example.com/a.pdf"}]}])
    assert by_url.value.param == "input[0].content[0].file_url"
    long = {"type": "input_file", "filename": "long.txt", "file_data": base64.b64encode(b"word " * 300).decode()}
    with pytest.raises(openai.BadRequestError) as too_long:
        client.responses.create(model=MODEL, input=[{"role": "user", "content": [long]}])
    assert too_long.value.code == "file_too_large"


def _pdf() -> bytes:
    """A one-page PDF with a line of text, written by hand (offsets computed)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        None,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    stream = b"BT /F1 12 Tf 10 50 Td (Hello from a PDF) Tj ET"
    objects[3] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


PDF = _pdf()
