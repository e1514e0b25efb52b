"""The output items as the API writes them, field for field (`openai/types/responses/response_output_item.py`
and the types it names): typed dicts, like `ResponseObject`, written into the stream and the store as
they are. Each `OutputItem` (items.py, tools/) makes its own in `as_dict`.

What a content part, an action or a tool's listing holds is written where it is made; those stay
`dict[str, Any]` here.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, Union

from ...protocol import ItemStatus

Part = dict[str, Any]  # a content part, an output of a tool, an action: made where it is written


class MessageShape(TypedDict):
    id: str
    type: Literal["message"]
    status: ItemStatus
    content: list[Part]
    role: Literal["assistant"]
    phase: str | None


class ReasoningShape(TypedDict):
    id: str
    type: Literal["reasoning"]
    summary: list[Part]
    content: list[Part]
    encrypted_content: NotRequired[str]
    status: NotRequired[ItemStatus]  # written only when it was cut off


class FunctionCallShape(TypedDict):
    id: str
    type: Literal["function_call"]
    status: ItemStatus
    call_id: str
    name: str
    arguments: str
    namespace: NotRequired[str]


class CustomToolCallShape(TypedDict):
    id: str
    type: Literal["custom_tool_call"]
    status: ItemStatus
    call_id: str
    name: str
    input: str
    namespace: NotRequired[str]


class CompactionShape(TypedDict):
    id: str
    type: Literal["compaction"]
    encrypted_content: str | None
    created_by: None


class ShellCallShape(TypedDict):
    id: str
    type: Literal["shell_call"]
    call_id: str
    action: Part
    environment: Part | None
    status: ItemStatus


class ShellCallOutputShape(TypedDict):
    id: str
    type: Literal["shell_call_output"]
    call_id: str
    output: list[Part]
    max_output_length: int | None
    status: ItemStatus


class LocalShellCallShape(TypedDict):
    id: str
    type: Literal["local_shell_call"]
    call_id: str
    action: Part
    status: ItemStatus


class ApplyPatchCallShape(TypedDict):
    id: str
    type: Literal["apply_patch_call"]
    call_id: str
    operation: Part | None
    status: ItemStatus


class CodeInterpreterCallShape(TypedDict):
    id: str
    type: Literal["code_interpreter_call"]
    status: ItemStatus
    code: str
    container_id: str
    outputs: list[Part] | None  # None unless `include` asks for them


class WebSearchCallShape(TypedDict):
    id: str
    type: Literal["web_search_call"]
    status: ItemStatus
    action: NotRequired[Part]  # once it ran (or was closed before it did: its kind only)


class FileSearchCallShape(TypedDict):
    id: str
    type: Literal["file_search_call"]
    status: ItemStatus
    queries: list[str]
    results: list[Part] | None


class ToolSearchCallShape(TypedDict):
    id: str
    type: Literal["tool_search_call"]
    call_id: str
    execution: str
    arguments: Any
    status: ItemStatus


class ToolSearchOutputShape(TypedDict):
    id: str
    type: Literal["tool_search_output"]
    call_id: str
    execution: str
    tools: Any
    status: ItemStatus


class McpCallShape(TypedDict):
    id: str
    type: Literal["mcp_call"]
    status: ItemStatus
    approval_request_id: str | None
    arguments: str
    error: Part | None  # an mcp_tool_execution_error or mcp_protocol_error
    name: str
    output: str | None
    server_label: str


class McpListToolsShape(TypedDict):
    id: str
    type: Literal["mcp_list_tools"]
    server_label: str
    tools: list[Part]
    error: NotRequired[str]


class McpApprovalRequestShape(TypedDict):
    id: str
    type: Literal["mcp_approval_request"]
    arguments: str
    name: str
    server_label: str


OutputItemShape = Union[
    MessageShape,
    ReasoningShape,
    FunctionCallShape,
    CustomToolCallShape,
    CompactionShape,
    ShellCallShape,
    ShellCallOutputShape,
    LocalShellCallShape,
    ApplyPatchCallShape,
    CodeInterpreterCallShape,
    WebSearchCallShape,
    FileSearchCallShape,
    ToolSearchCallShape,
    ToolSearchOutputShape,
    McpCallShape,
    McpListToolsShape,
    McpApprovalRequestShape,
]
