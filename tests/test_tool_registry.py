"""The registry of tool kinds (gateway/responses/tools/registry.py) against the request's types: a kind
of tool added to one and not the other, or an `include` value nobody honours, fails here."""

from __future__ import annotations

import typing

from connectors.namespaces import RESERVED_NAMESPACES
from gateway.protocol import Include
from gateway.responses.shapes.request import AllowedTools, NamedChoice
from gateway.responses.shapes.tool_models import Tool, UnavailableTool
from gateway.responses.tools.registry import BUILT_IN_NAMESPACES, INCLUDABLE, TOOLS, choice_owner, kind_of


def _members(annotated: typing.Any) -> tuple[type, ...]:
    union = typing.get_args(annotated)[0]
    return typing.get_args(union)


def test_every_request_tool_type_has_one_kind_or_is_refused_by_name() -> None:
    for model in _members(Tool):
        owners = [kind for kind in TOOLS if model in kind.request_types]
        assert len(owners) == (0 if model is UnavailableTool else 1), model


def test_every_named_tool_choice_belongs_to_one_kind() -> None:
    for model in _members(NamedChoice):
        owners = [kind for kind in TOOLS if model in kind.choices]
        assert len(owners) == (0 if model is AllowedTools else 1), model


def test_every_include_value_is_honoured_by_someone() -> None:
    assert INCLUDABLE == {value.value for value in Include}


def test_built_in_namespaces_are_reserved() -> None:
    assert BUILT_IN_NAMESPACES == {"functions", "python", "browser", "file_search", "shell", "local_shell", "apply_patch", "tool_search"}
    assert BUILT_IN_NAMESPACES <= RESERVED_NAMESPACES


def test_lookups() -> None:
    from gateway.responses.shapes.request import NamedCodeInterpreter
    from gateway.responses.shapes.tool_models import CodeInterpreterTool
    from gateway.responses.tools.code_interpreter import CodeInterpreter

    assert kind_of(CodeInterpreterTool(type="code_interpreter")) is CodeInterpreter
    assert choice_owner(NamedCodeInterpreter(type="code_interpreter")) is CodeInterpreter
    assert choice_owner("auto") is None


def _input_types() -> dict[str, type]:
    """The input items a request may hold, by their `type` tag."""
    from gateway.responses.shapes.input_models import InputItem

    members = typing.get_args(typing.get_args(InputItem)[0])
    return {typing.get_args(member)[1].tag: typing.get_args(member)[0] for member in members}


def test_every_input_item_type_has_one_reader() -> None:
    from gateway.responses.loop.input_items import READERS

    assert set(READERS) == set(_input_types().values())


def test_every_output_item_a_tool_produces_is_read_back() -> None:
    """A client that sends a response's output back as input (the SDKs' `to_input_list()`, Codex without
    `previous_response_id`) sends every item a tool produced: each must be an input item some tool reads."""
    from gateway.responses.tools.registry import INPUT_READERS

    inputs = _input_types()
    unread = []
    for kind in TOOLS:
        for produced in kind.produces:
            model = inputs.get(produced.type)
            if model is None or model not in INPUT_READERS:
                unread.append(f"{kind.__name__}: {produced.type}")
    assert unread == []
    # It reads what it is given: every kind that runs a call says what it produces.
    assert all(kind.produces for kind in TOOLS)


def _type_tags(members: tuple[typing.Any, ...]) -> set[str]:
    """The `type` tags of the openai SDK's item types (models or TypedDicts), each a Literal."""
    tags = set()
    for member in members:
        fields = getattr(member, "model_fields", None)
        annotation = fields["type"].annotation if fields is not None else typing.get_type_hints(member, include_extras=True)["type"]
        while typing.get_origin(annotation) in (typing.Required, typing.NotRequired, typing.Annotated, typing.Union):
            annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
        tags.update(typing.get_args(annotation))
    return tags


def test_every_item_the_gateway_produces_is_one_the_sdk_sends_back_and_it_reads() -> None:
    """Derived from the openai SDK's own unions, not from ours: every item the gateway can produce (the
    model's messages, reasoning and compactions, and each registered tool's items) is an output item of the
    SDK's, an input item the SDK lets a client send, and an input item the gateway reads."""
    from openai.types.responses.response_input_item_param import ResponseInputItemParam
    from openai.types.responses.response_output_item import ResponseOutputItem

    from gateway.responses.loop.input_items import READERS

    sdk_outputs = _type_tags(typing.get_args(typing.get_args(ResponseOutputItem)[0]))
    sdk_inputs = _type_tags(typing.get_args(ResponseInputItemParam))
    produced = {"message", "reasoning", "compaction"} | {item.type for kind in TOOLS for item in kind.produces}
    assert produced - sdk_outputs == set()
    assert produced - sdk_inputs == set()
    ours = _input_types()
    assert {tag for tag in produced if ours.get(tag) not in READERS} == set()


def test_each_call_the_client_answers_is_owed_by_its_tool() -> None:
    """What steering names as owed (`response.steer.pending`) for each kind of call the client runs: every
    tool's `owes`, gathered by the registry. A call no longer open is owed nothing."""
    from gateway.responses.history.dialog import Dialog
    from gateway.responses.steering import required_input
    from gateway.responses.tools.mcp_history import McpState, PendingApproval

    output = [
        {"type": "function_call", "call_id": "c1", "name": "get_weather"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "grep"},
        {"type": "shell_call", "call_id": "c3"},
        {"type": "apply_patch_call", "call_id": "c4"},
        {"type": "tool_search_call", "call_id": "c5", "execution": "client"},
        {"type": "local_shell_call", "call_id": "c6"},
        {"type": "function_call", "call_id": "answered", "name": "get_time"},
        {"type": "mcp_approval_request", "id": "mcpr_1"},
    ]
    dialog = Dialog()
    dialog.open_calls.update({call_id: "x" for call_id in ("c1", "c2", "c3", "c4", "c5", "c6")})
    dialog.tool_state(McpState).pending_approvals["mcpr_1"] = PendingApproval("server", "tool", "{}", "mcp_server.tool", "commentary")
    assert required_input(output, dialog) == [
        {"type": "function_call_output", "call_id": "c1", "name": "get_weather"},
        {"type": "custom_tool_call_output", "call_id": "c2"},
        {"type": "shell_call_output", "call_id": "c3"},
        {"type": "apply_patch_call_output", "call_id": "c4"},
        {"type": "tool_search_output", "call_id": "c5", "execution": "client"},
        {"type": "local_shell_call_output", "call_id": "c6"},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1"},
    ]


def test_an_item_types_id_prefix_is_spelled_once() -> None:
    """Each output item type names its id prefix on its class (`id_prefix`); whatever makes an id of that
    type (its input reader, for an item sent back without one) asks the class (`fresh_id()`): a prefix
    spelled again, or an id made from a position, is found here."""
    import ast
    from pathlib import Path

    from gateway.responses.shapes.items import OutputItem

    def subclasses(cls: type) -> list[type]:
        return [cls, *(each for sub in cls.__subclasses__() for each in subclasses(sub))]

    import gateway.responses.loop.compaction  # noqa: F401  (its item type, among the registry's)

    prefixes = {cls.id_prefix for cls in subclasses(OutputItem) if "id_prefix" in vars(cls)}
    assert {"msg", "rs", "fc", "mcp", "fs", "ws", "cmp"} <= prefixes
    spelled = []
    for path in sorted(Path("gateway").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "new_id" and node.args:
                argument = node.args[0]
                made_by_its_class = ast.unparse(argument) == "cls.id_prefix"  # OutputItem.fresh_id
                if not made_by_its_class and (not isinstance(argument, ast.Constant) or argument.value in prefixes):
                    spelled.append(f"{path}:{node.lineno}: {ast.unparse(argument)}")
            if isinstance(node, ast.JoinedStr) and any(
                isinstance(part, ast.Constant) and str(part.value).startswith(tuple(f"{prefix}_" for prefix in prefixes)) for part in node.values[:1]
            ):
                spelled.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert spelled == []


def test_every_tool_has_the_hooks_its_kind_needs() -> None:
    """Each registered tool, against the `Tool` contract (tools/base.py): what it lacks is named, hook by
    hook, so a new tool is its module and its registry line, and this test says what is left to write."""
    from gateway.responses.tools.base import Tool
    from gateway.responses.tools.client import ClientTools
    from gateway.responses.tools.client_actions import ClientAction
    from gateway.responses.tools.registry import OWED_INPUT

    lacking = []
    for kind in TOOLS:

        def lacks(hook: str, kind: type = kind) -> None:
            lacking.append(f"{kind.__name__} lacks {hook}")

        for attribute in ("request_types", "metric", "produces"):
            if not getattr(kind, attribute):
                lacks(attribute)
        for produced in kind.produces:
            if not getattr(produced, "id_prefix", None) or not getattr(produced, "type", None):
                lacks(f"the type and id prefix of {produced.__name__}")
        if kind.open_call is Tool.open_call:
            lacks("open_call (it refuses every call)")
        if kind.declare is Tool.declare:
            lacks("declare (the model is never told of it)")
        if kind.choices and kind.check_choice is Tool.check_choice:
            lacks("check_choice (it owns a named tool_choice)")
        if issubclass(kind, (ClientAction, ClientTools)):  # the client runs its calls: a stopped response owes them
            for produced in kind.produces:
                if produced.type.endswith("_call") and produced.type not in OWED_INPUT:
                    lacks(f"owes for {produced.type}")
    assert lacking == []
