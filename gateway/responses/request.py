"""The body of `POST /v1/responses`, validated. Fields the gateway does not use are accepted and ignored,
as OpenAI's SDKs send several of them by default; wrong types and unknown roles, item types and tool
types are 400s that name the field."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator


class _Model(BaseModel):
    # Strict: "yes" is not a boolean and "5" is not a number, as in OpenAI's API.
    model_config = ConfigDict(extra="ignore", strict=True)


class InputText(_Model):
    type: Literal["input_text"]
    text: str


class OutputText(_Model):
    type: Literal["output_text"]
    text: str


class ReasoningText(_Model):
    type: Literal["reasoning_text"]
    text: str


class SummaryText(_Model):
    type: Literal["summary_text"]
    text: str


ContentPart = Annotated[Union[InputText, OutputText], Field(discriminator="type")]


class MessageItem(_Model):
    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]
    # An assistant message's phase: "commentary" was a preamble, anything else a final answer.
    phase: Literal["commentary", "final_answer"] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ReasoningItem(_Model):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[SummaryText] = []
    content: list[ReasoningText] | None = None

    def text(self) -> str:
        parts = self.content if self.content else self.summary
        return "".join(part.text for part in parts)


class FunctionCallItem(_Model):
    type: Literal["function_call"]
    id: str | None = None
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(_Model):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[InputText]

    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "".join(part.text for part in self.output)


class McpApprovalRequestItem(_Model):
    type: Literal["mcp_approval_request"]
    id: str
    server_label: str
    name: str
    arguments: str


class McpApprovalResponseItem(_Model):
    type: Literal["mcp_approval_response"]
    id: str | None = None
    approval_request_id: str
    approve: bool
    reason: str | None = None


class McpListToolsItem(_Model):
    type: Literal["mcp_list_tools"]
    id: str | None = None
    server_label: str
    tools: list[dict[str, Any]] = []
    error: str | None = None


class McpCallItem(_Model):
    type: Literal["mcp_call"]
    id: str | None = None
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: str | None = None
    approval_request_id: str | None = None
    status: str | None = None


def _item_type(value: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("type", "message")
    return getattr(value, "type", None)


InputItem = Annotated[
    Union[
        Annotated[MessageItem, Tag("message")],
        Annotated[ReasoningItem, Tag("reasoning")],
        Annotated[FunctionCallItem, Tag("function_call")],
        Annotated[FunctionCallOutputItem, Tag("function_call_output")],
        Annotated[McpApprovalRequestItem, Tag("mcp_approval_request")],
        Annotated[McpApprovalResponseItem, Tag("mcp_approval_response")],
        Annotated[McpListToolsItem, Tag("mcp_list_tools")],
        Annotated[McpCallItem, Tag("mcp_call")],
    ],
    Discriminator(_item_type),
]


class FunctionDefinition(_Model):
    """A client-side function, as both APIs describe it."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(FunctionDefinition):
    type: Literal["function"]


class AutoContainer(_Model):
    type: Literal["auto"]
    file_ids: list[str] = Field([], max_length=0, description="uploaded files are not supported")
    memory_limit: str | None = None


class CodeInterpreterTool(_Model):
    """The Harmony `python` tool, run in the gateway's sandbox. `container` is `{"type": "auto"}` (the
    conversation's session, started when first needed) or the id of a live session."""

    type: Literal["code_interpreter"]
    container: str | AutoContainer = AutoContainer(type="auto")


class ToolNameFilter(_Model):
    tool_names: list[str] = []
    read_only: bool | None = None


class ApprovalFilter(_Model):
    always: ToolNameFilter | None = None
    never: ToolNameFilter | None = None


class McpTool(_Model):
    """An MCP server: a configured one by `server_label` alone, or the request's own at `server_url`
    (only where `mcp.allowed_urls` allows). `headers` go to that server only, never to logs or storage."""

    type: Literal["mcp"]
    server_label: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    server_url: str | None = None
    server_description: str | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None
    allowed_tools: list[str] | ToolNameFilter | None = None
    require_approval: Literal["always", "never"] | ApprovalFilter | None = None
    connector_id: None = Field(None, description="connectors are OpenAI's own: not supported")

    def allowed_names(self) -> set[str] | None:
        if self.allowed_tools is None:
            return None
        if isinstance(self.allowed_tools, ToolNameFilter):
            return set(self.allowed_tools.tool_names)
        return set(self.allowed_tools)

    def echo(self) -> dict[str, Any]:
        """The tool as the Response object shows it: credentials left out."""
        return self.model_dump(exclude={"authorization", "connector_id"}) | {"headers": None}


Tool = Annotated[Union[FunctionTool, CodeInterpreterTool, McpTool], Field(discriminator="type")]


class Reasoning(_Model):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: str | None = None


class TextFormat(_Model):
    type: Literal["text", "json_schema", "json_object"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextConfig(_Model):
    format: TextFormat | None = None
    verbosity: str | None = None


class NamedFunction(_Model):
    type: Literal["function"]
    name: str


class ResponsesRequest(_Model):
    model: str | None = None
    input: str | list[InputItem]
    instructions: str | None = None
    reasoning: Reasoning | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    max_tool_calls: int | None = Field(None, ge=0)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    metadata: dict[str, str] | None = None
    store: bool = True
    previous_response_id: str | None = None
    stream: bool = False
    tools: list[Tool] = []
    tool_choice: Literal["auto", "none", "required"] | NamedFunction = "auto"
    parallel_tool_calls: bool = True
    text: TextConfig | None = None
    user: str | None = None

    @field_validator("metadata")
    @classmethod
    def _metadata_limits(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and len(value) > 16:
            raise ValueError("at most 16 metadata keys are allowed")
        return value
