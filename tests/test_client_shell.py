"""The tools the client runs on its own machine: `shell` with a local environment and `apply_patch`,
through the openai SDK and the Agents SDK: declared in Harmony, streamed as their own items, answered by
the client's output items, and refused by name where nothing here runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from .conftest import MODEL, emulator_stats, stream_sdk
from .helpers import items_of

SHELL = {"type": "shell", "environment": {"type": "local"}}
COMMANDS = {"commands": ["ls -la", "cat notes.txt"], "timeout_ms": 5000}
RUN = f"[[call shell.exec {json.dumps(COMMANDS)}]]"
PATCH = {"type": "create_file", "path": "hello.txt", "diff": "+hello\n+world\n"}


def test_the_shell_is_declared_to_the_model_as_a_namespace(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input="hi", tools=[SHELL])
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace shell {" in prompt and "type exec = (_: {" in prompt and "commands: string[]" in prompt
    assert prompt.index("<|start|>developer") < prompt.index("namespace shell")


def test_a_local_environments_skills_are_listed_for_the_model(gateway, emulator):
    skill = {"name": "pdf-forms", "description": "Fill in PDF forms.", "path": "/home/me/skills/pdf-forms"}
    shell = {"type": "shell", "environment": {"type": "local", "skills": [skill]}}
    gateway.client().responses.create(model=MODEL, input="hi", tools=[shell])
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "- pdf-forms: Fill in PDF forms. (read /home/me/skills/pdf-forms/SKILL.md before using it)" in prompt


def test_a_shell_call_streams_its_commands_and_ends_the_response(gateway):
    events = stream_sdk(gateway.client(), input=RUN, tools=[SHELL])
    types = [event["type"] for event in events]
    commands = [event for event in events if event["type"].startswith("response.shell_call_command.")]
    assert [(event["type"].rsplit(".", 1)[1], event["command_index"]) for event in commands] == [
        ("added", 0),
        ("delta", 0),
        ("done", 0),
        ("added", 1),
        ("delta", 1),
        ("done", 1),
    ]
    assert [event["delta"] for event in commands if event["type"].endswith("delta")] == COMMANDS["commands"]
    assert types.index("response.output_item.added") < types.index("response.shell_call_command.added")
    final = events[-1]["response"]
    assert final["status"] == "completed"
    call = final["output"][-1]
    assert call["type"] == "shell_call" and call["status"] == "completed" and call["call_id"].startswith("call_")
    assert call["action"] == {"commands": COMMANDS["commands"], "timeout_ms": 5000, "max_output_length": None}
    assert call["environment"] == {"type": "local"}


def test_the_client_answers_a_shell_call_and_the_model_reads_it(gateway):
    client = gateway.client()
    first = client.responses.create(model=MODEL, input=RUN, tools=[SHELL])
    (call,) = items_of(first, "shell_call")
    output = [
        {"stdout": "total 0\nnotes.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
        {"stdout": "", "stderr": "cat: notes.txt: Permission denied\n", "outcome": {"type": "exit", "exit_code": 1}},
    ]
    answer = {"type": "shell_call_output", "call_id": call.call_id, "output": output}
    second = client.responses.create(model=MODEL, previous_response_id=first.id, input=[answer], tools=[SHELL])
    text = second.output_text
    assert "[command 1: exit code 0]\ntotal 0\nnotes.txt" in text and "[command 2: exit code 1]\n[stderr]\ncat: notes.txt: Permission denied" in text
    # Stateless: the whole thread sent back, the call as the response gave it.
    items = [{"role": "user", "content": RUN}, call.model_dump(exclude_none=True), answer]
    third = client.responses.create(model=MODEL, input=items, tools=[SHELL], store=False)
    assert third.output_text == text
    # An output for a call that was never made is a 400 that names it.
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=MODEL, previous_response_id=first.id, input=[answer | {"call_id": "call_nope"}], tools=[SHELL])
    assert raised.value.param == "input[0].call_id"


def test_arguments_that_are_not_a_shell_call_go_back_to_the_model(gateway):
    bad = '[[call shell.exec {"command": "ls"}]] [[call shell.exec {"commands": ["ls"]}]]'
    response = gateway.client().responses.create(model=MODEL, input=bad, tools=[SHELL])
    # The call the client could not run shows no item; the model wrote it again, and that one is shown.
    (call,) = items_of(response, "shell_call")
    assert call.status == "completed" and call.action.commands == ["ls"]


def test_tool_choice_shell_forces_the_call(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input="list the files", tools=[SHELL], tool_choice={"type": "shell"})
    assert emulator_stats(emulator)["last_prompt"].endswith("<|start|>assistant<|channel|>commentary to=shell.exec <|constrain|>json<|message|>")
    with pytest.raises(openai.BadRequestError) as raised:
        gateway.client().responses.create(model=MODEL, input="hi", tools=[], tool_choice={"type": "shell"})
    assert raised.value.param == "tool_choice.type"


def test_two_shells_and_a_namespace_named_shell_are_refused(gateway):
    client = gateway.client()
    with pytest.raises(openai.BadRequestError) as twice:
        client.responses.create(model=MODEL, input="hi", tools=[SHELL, SHELL])
    assert twice.value.param == "tools[1].type"
    with pytest.raises(openai.BadRequestError) as reserved:
        client.responses.create(
            model=MODEL, input="hi", tools=[{"type": "namespace", "name": "shell", "description": "", "tools": [{"type": "function", "name": "x"}]}]
        )
    assert "shell" in reserved.value.message


@pytest.mark.parametrize("names_call_by", ["call_id", "id"])
def test_a_local_shell_call_and_its_output(gateway, names_call_by):
    client, tools = gateway.client(), [{"type": "local_shell"}]
    argv = {"command": ["ls", "-la", "/tmp"], "working_directory": "/home"}
    events = stream_sdk(client, input=f"[[call local_shell.exec {json.dumps(argv)}]]", tools=tools)
    call = events[-1]["response"]["output"][-1]
    assert call["type"] == "local_shell_call" and call["status"] == "completed"
    assert call["action"] == {
        "type": "exec",
        "command": ["ls", "-la", "/tmp"],
        "env": {},
        "timeout_ms": None,
        "user": None,
        "working_directory": "/home",
    }
    # The Agents SDK names the call by call_id; OpenAI's type, by id.
    answer = {"type": "local_shell_call_output", names_call_by: call["call_id"], "output": "a.txt\nb.txt"}
    second = client.responses.create(model=MODEL, previous_response_id=events[-1]["response"]["id"], input=[answer], tools=tools)
    assert second.output_text == "The tool said: a.txt\nb.txt"


def test_an_apply_patch_call_streams_and_its_output_is_read(gateway):
    client = gateway.client()
    events = stream_sdk(client, input=f"[[call apply_patch.apply_patch {json.dumps(PATCH)}]]", tools=[{"type": "apply_patch"}])
    call = events[-1]["response"]["output"][-1]
    assert call["type"] == "apply_patch_call" and call["status"] == "completed"
    assert call["operation"] == PATCH
    first_id = events[-1]["response"]["id"]
    answer = {"type": "apply_patch_call_output", "call_id": call["call_id"], "status": "failed", "output": "hello.txt exists"}
    second = client.responses.create(model=MODEL, previous_response_id=first_id, input=[answer], tools=[{"type": "apply_patch"}])
    assert second.output_text == "The tool said: The patch failed.\nhello.txt exists"


@pytest.mark.parametrize(
    "operation",
    [
        {"type": "create_file", "path": "a.txt", "diff": "hello\n"},  # a new file's lines are all added
        {"type": "update_file", "path": "a.txt", "diff": "@@\n keep\n"},  # changes nothing
        {"type": "update_file", "path": "a.txt", "diff": "@@\n*oops\n+x\n"},
        {"type": "update_file", "path": "a.txt"},  # no diff
    ],
)
def test_a_diff_that_is_not_v4a_goes_back_to_the_model(gateway, operation):
    good = {"type": "update_file", "path": "a.txt", "diff": "@@ def f():\n-    return 1\n+    return 2\n"}
    ask = f"[[call apply_patch.apply_patch {json.dumps(operation)}]] [[call apply_patch.apply_patch {json.dumps(good)}]]"
    response = gateway.client().responses.create(model=MODEL, input=ask, tools=[{"type": "apply_patch"}])
    (call,) = items_of(response, "apply_patch_call")
    assert call.status == "completed" and call.operation.diff == good["diff"]


def test_the_agents_sdk_shell_and_apply_patch_tools(gateway, tmp_path: Path):
    agents = pytest.importorskip("agents")
    from agents import Agent, ApplyPatchTool, ModelSettings, Runner, ShellTool
    from agents.editor import ApplyPatchOperation, ApplyPatchResult

    ran: list[list[str]] = []

    def shell(request: Any) -> str:
        ran.append(list(request.data.action.commands))
        return "notes.txt\n"

    class Editor:
        def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            lines = [line[1:] for line in (operation.diff or "").splitlines()]
            (tmp_path / operation.path).write_text("\n".join(lines) + "\n")
            return ApplyPatchResult(output=f"created {operation.path}")

        def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            raise NotImplementedError

        def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            (tmp_path / operation.path).unlink()
            return ApplyPatchResult(output=f"deleted {operation.path}")

    model = agents.OpenAIResponsesModel(model=MODEL, openai_client=gateway.async_client())
    agent = Agent(
        name="coder",
        model=model,
        tools=[ShellTool(executor=shell), ApplyPatchTool(editor=Editor())],
        model_settings=ModelSettings(store=True),
    )
    ask = f"{RUN} [[call apply_patch.apply_patch {json.dumps(PATCH)}]] [[answer done]]"
    result = Runner.run_sync(agent, ask)
    assert ran == [COMMANDS["commands"]]
    assert (tmp_path / "hello.txt").read_text() == "hello\nworld\n"
    assert result.final_output == "done"

    from agents import LocalShellTool

    argv: list[list[str]] = []

    def local(request: Any) -> str:
        argv.append(list(request.data.action.command))
        return "hello from bash"

    agent = Agent(name="runner", model=model, tools=[LocalShellTool(executor=local)], model_settings=ModelSettings(store=True))
    result = Runner.run_sync(agent, '[[call local_shell.exec {"command": ["bash", "-lc", "echo hello"]}]]')
    assert argv == [["bash", "-lc", "echo hello"]]
    assert result.final_output == "The tool said: hello from bash"


def test_allowed_tools_name_the_shell_and_apply_patch_by_their_type(gateway, emulator):
    """`allowed_tools` names a built-in tool by its type, as OpenAI's docs show (`{"type": "image_generation"}`):
    the shell and apply_patch are offered when listed, and left out when not."""
    patch = {"type": "apply_patch"}
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "shell"}]}
    response = gateway.client().responses.create(model=MODEL, input=RUN, tools=[SHELL, patch], tool_choice=choice)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace shell {" in prompt and "namespace apply_patch" not in prompt
    assert [item.type for item in response.output if item.type != "reasoning"] == ["shell_call"]
    choice["tools"] = [{"type": "apply_patch"}]
    gateway.client().responses.create(model=MODEL, input="hi", tools=[SHELL, patch], tool_choice=choice)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace apply_patch" in prompt and "namespace shell {" not in prompt
