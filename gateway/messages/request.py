"""The body of `POST /v1/messages` (and of `count_tokens`), field for field as the anthropic SDK types it
(`MessageCreateParams`, with the beta fields Claude Code sends on `?beta=true`). Its translation into a
Responses request is translate.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator

from ..core.models import StrictModel
from ..responses.loop.stops import MAX_STOP_CHARS
from .blocks import Message, TextBlock

MAX_STOP_SEQUENCES = 8


class ClientTool(StrictModel):
    """A tool the client runs: its `tool_use` blocks come back to it (the Responses API's function)."""

    type: Literal["custom"] | None = None
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    input_schema: dict[str, Any]
    strict: bool | None = None
    defer_loading: bool = False  # declared to the model only once a tool_result's `tool_reference` names it
    cache_control: dict[str, Any] | None = None
    allowed_callers: list[str] | None = None
    eager_input_streaming: bool | None = None
    input_examples: list[dict[str, Any]] | None = Field(None, max_length=32)

    def declaration(self) -> dict[str, Any]:
        """The tool as the Responses API declares a function (not strict unless the client asks)."""
        tool: dict[str, Any] = {"type": "function", "name": self.name, "parameters": self.input_schema, "strict": self.strict is True}
        if self.description:
            tool["description"] = self.description
        return tool


class ServerTool(StrictModel, extra="allow"):
    """A tool Anthropic defines (`web_search_20250305`, `code_execution_20250825`, ...), named by `type`:
    served from the gateway's own machinery where it has one (translate.py), else refused by name."""

    type: str = Field(max_length=64)
    name: str | None = Field(None, max_length=128)


def _tool_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "client" if kind in (None, "custom") else "server"


Tool = Annotated[Union[Annotated[ClientTool, Tag("client")], Annotated[ServerTool, Tag("server")]], Discriminator(_tool_kind)]


class ChoiceAuto(StrictModel):
    type: Literal["auto"]
    disable_parallel_tool_use: bool = False


class ChoiceAny(StrictModel):
    type: Literal["any"]
    disable_parallel_tool_use: bool = False


class ChoiceTool(StrictModel):
    type: Literal["tool"]
    name: str = Field(min_length=1, max_length=128)
    disable_parallel_tool_use: bool = False


class ChoiceNone(StrictModel):
    type: Literal["none"]


ToolChoice = Annotated[Union[ChoiceAuto, ChoiceAny, ChoiceTool, ChoiceNone], Field(discriminator="type")]


class ThinkingEnabled(StrictModel):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=0)
    display: str | None = Field(None, max_length=32)


class ThinkingAdaptive(StrictModel):
    type: Literal["adaptive"]
    display: str | None = Field(None, max_length=32)  # "summarized", "omitted"; Claude Code sends "updates"


class ThinkingDisabled(StrictModel):
    type: Literal["disabled"]


class ThinkingBetweenTools(StrictModel):
    type: Literal["between_tools"]
    display: str | None = Field(None, max_length=32)


Thinking = Annotated[Union[ThinkingEnabled, ThinkingAdaptive, ThinkingDisabled, ThinkingBetweenTools], Field(discriminator="type")]


class JSONFormat(StrictModel):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(StrictModel):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JSONFormat | None = None


class RequestMetadata(StrictModel):
    user_id: str | None = Field(None, max_length=4096)


class ContextEdit(StrictModel, extra="allow"):
    type: str = Field(max_length=64)


class ContextManagement(StrictModel):
    edits: list[ContextEdit] = Field(default_factory=list, max_length=16)


class McpServer(StrictModel):
    type: Literal["url"]
    name: str = Field(min_length=1, max_length=64)
    url: str = Field(min_length=1, max_length=2048)
    authorization_token: str | None = Field(None, max_length=8192)
    tool_configuration: dict[str, Any] | None = None


class MessagesRequest(StrictModel):
    model: str = Field(min_length=1, max_length=256)
    max_tokens: int = Field(ge=1)
    messages: list[Message] = Field(min_length=1, max_length=100_000)
    system: str | list[TextBlock] | None = None
    stream: bool = False
    tools: list[Tool] = Field(default_factory=list, max_length=1024)
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    stop_sequences: list[Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]] | None = None
    metadata: RequestMetadata | None = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)  # vLLM's own sampler takes it; the Responses machinery does not: read by nothing
    mcp_servers: list[McpServer] | None = Field(None, max_length=20)
    context_management: ContextManagement | None = None
    # Accepted with no effect here (README: "Claude Code and the Messages API"): prompt caching is vLLM's own,
    # capacity and speed are the engine's, the rest name Anthropic's accounts and regions.
    cache_control: dict[str, Any] | None = None
    service_tier: Literal["auto", "standard_only"] | None = None
    speed: Literal["standard", "fast"] | None = None
    inference_geo: str | None = Field(None, max_length=64)
    diagnostics: dict[str, Any] | None = None
    container: str | dict[str, Any] | None = None
    betas: list[str] | None = Field(None, max_length=64)

    @field_validator("stop_sequences")
    @classmethod
    def _stop_sequences(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(value) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences are allowed")
        return value


class CountTokensRequest(MessagesRequest):
    """`count_tokens` takes the same body without `max_tokens` (and never streams)."""

    max_tokens: int = Field(1, ge=1)
