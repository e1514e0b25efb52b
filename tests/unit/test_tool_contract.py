"""Every registered tool against the `Tool` contract (tools/base.py), in process: declared to the model, a
call opened as its header arrives, written, and its item read back as the input a client sends with the
history. Tools the client runs are driven whole here; the hosted ones, whose `run` needs a sandbox, an MCP
server, a browser or a vector store, are run end to end by the test module named for each. A tool
registered with neither fails here by name."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import TypeAdapter

from gateway.engine.completion import FinishReason
from gateway.responses.events.output import ResponseOutput
from gateway.responses.history.dialog import Dialog
from gateway.responses.loop.input_items import append_input
from gateway.responses.loop.turn import AnswerOptions, Turn
from gateway.responses.shapes.input_models import InputItem
from gateway.responses.tools.registry import TOOLS

from .scripted import ScriptedCall, chunked, model_tokens, toolset_for

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _call(recipient: str, arguments: str) -> str:
    return f"<|channel|>commentary to={recipient} <|constrain|>json<|message|>{arguments}<|call|>"


# A request's tool of each kind the client runs, and a call the model makes to it.
IN_PROCESS: dict[str, tuple[dict[str, Any], str]] = {
    "FunctionTools": ({"type": "function", "name": "get_weather", "parameters": SCHEMA}, _call("functions.get_weather", '{"city": "Paris"}')),
    "NamespaceTools": (
        {"type": "namespace", "name": "crm", "description": "Records.", "tools": [{"type": "function", "name": "lookup", "parameters": SCHEMA}]},
        _call("crm.lookup", '{"city": "Oslo"}'),
    ),
    "Shell": ({"type": "shell"}, _call("shell.exec", '{"commands": ["ls -la"]}')),
    "LocalShell": ({"type": "local_shell"}, _call("local_shell.exec", '{"command": ["ls", "-la"]}')),
    "ApplyPatch": ({"type": "apply_patch"}, _call("apply_patch.apply_patch", '{"type": "create_file", "path": "a.txt", "diff": "+hello"}')),
}
# The hosted tools, run end to end against real servers (and the client's tool search, with its catalog).
END_TO_END = {
    "CodeInterpreter": "tests/test_sandbox.py",
    "McpServers": "tests/test_mcp.py",
    "WebSearch": "tests/test_browser.py",
    "FileSearch": "tests/test_file_search.py",
    "ToolSearch": "tests/test_tool_search.py",
}


def test_every_registered_tool_is_held_to_the_contract() -> None:
    assert {kind.__name__ for kind in TOOLS} == set(IN_PROCESS) | set(END_TO_END)


@pytest.mark.parametrize("kind", sorted(IN_PROCESS))
def test_a_client_tools_call_is_declared_opened_written_and_read_back(kind: str) -> None:
    declared, call_text = IN_PROCESS[kind]
    output, dialog = ResponseOutput(), Dialog()

    async def main() -> Any:
        toolset = await toolset_for({"tools": [declared]}, output, dialog)
        declarations = toolset.declarations()
        assert declarations.functions or declarations.system or declarations.developer, f"{kind} declares nothing"
        assert toolset.call_shapes(), f"{kind} gives the grammar no call"
        turn = Turn(output, dialog, toolset, AnswerOptions())
        return await turn.stream(ScriptedCall(chunked(model_tokens(call_text), 3)), [], lambda usage: None, 1, None)

    outcome = anyio.run(main)
    assert outcome.finish_reason is FinishReason.STOP
    call = outcome.call
    assert call is not None and call.kind.ends_response and call.output is None, (kind, call)
    assert call.item is not None and call.item.done_sent
    produced = call.item.as_dict()
    assert type(call.item) in next(tool for tool in TOOLS if tool.__name__ == kind).produces
    assert dialog.open_calls, "the client owes the call's output"

    # The item as a client sends it back with the history: a valid input item, read into a new dialog.
    echoed = TypeAdapter(InputItem).validate_python(dict(produced))
    history = Dialog()
    records = append_input(history, [echoed])
    assert [record["id"] for record in records] == [produced["id"]]
    assert history.messages and history.open_calls == dialog.open_calls
