"""The body of `POST /v1/responses`, validated. Every field of OpenAI's API is either honoured or refused
with a 400 that names it (README: "Compatibility"); an unknown field is a 400 too, as OpenAI answers it.
Wrong types and unknown roles, item types and tool types are 400s that name the field.

Its input items are in input_models.py, its tools in tool_models.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, model_validator

from ...core.models import Metadata, StrictModel
from ...errors import APIError, bad_request
from .file_search_models import NamedFileSearch
from .input_models import (
    CompactionTriggerItem,
    InputItem,
)
from .shell_models import (
    NamedApplyPatch,
    NamedShell,
)
from .tool_models import (
    Tool,
)


class Reasoning(StrictModel):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    # Summaries are not written: the reasoning itself is returned (gpt-oss's is not hidden).
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None  # its older name


class TextFormat(StrictModel):
    type: Literal["text", "json_schema", "json_object"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextConfig(StrictModel):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class NamedFunction(StrictModel):
    type: Literal["function"]
    name: str


class NamedMcp(StrictModel):
    """Call this MCP server (the model picks the tool) or this tool of it."""

    type: Literal["mcp"]
    server_label: str
    name: str | None = None


class NamedCodeInterpreter(StrictModel):
    type: Literal["code_interpreter"]


class NamedWebSearch(StrictModel):
    """Search the web first (the model writes the query)."""

    type: Literal["web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26"]


class NamedCustom(StrictModel):
    type: Literal["custom"]
    name: str


class AllowedTools(StrictModel):
    """Only these of the request's tools are offered to the model; `required`: it must call one."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[dict[str, Any]] = Field(min_length=1)


ToolChoiceForm = Union[
    NamedFunction, NamedCustom, NamedMcp, NamedCodeInterpreter, NamedWebSearch, NamedFileSearch, NamedShell, NamedApplyPatch, AllowedTools
]
NamedChoice = Annotated[ToolChoiceForm, Field(discriminator="type")]


class StreamOptions(StrictModel):
    # OpenAI pads deltas with an `obfuscation` field unless told not to; the gateway never pads, so both
    # values give the same stream (padding hides token lengths from on-path observers of OpenAI's traffic).
    include_obfuscation: bool | None = None


# `include` values the gateway cannot honour, and why (those it honours: tools/registry.py).
NOT_INCLUDABLE = {
    "web_search_call.results": "a search's results are shown to the model only; its URLs come with web_search_call.action.sources",
    "computer_call_output.output.image_url": "this gateway has no computer tool",
    "message.input_image.image_url": "gpt-oss reads no images",
}

# Parameters of OpenAI's API the gateway does not implement: a 400 naming them unless they are absent or
# carry their "off" value.
UNSUPPORTED = {
    "prompt": "stored prompts are OpenAI's own",
    "moderation": "moderation is OpenAI's own",
    "image": "gpt-oss reads no images",
    "access_programs": "access programs are OpenAI's own",
    "background_options": "background options are not supported",
}


class ContextManagement(StrictModel):
    """Compaction when the prompt passes `compact_threshold` tokens (default: 80% of the context)."""

    type: Literal["compaction"]
    compact_threshold: int | None = Field(None, ge=1000)


class ConversationRef(StrictModel):
    id: str = Field(min_length=1, max_length=128)


class ResponsesRequest(StrictModel):
    model: str | None = None
    input: str | list[InputItem]
    instructions: str | None = None
    reasoning: Reasoning | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    max_tool_calls: int | None = Field(None, ge=0)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    metadata: Metadata | None = None
    store: bool = True
    previous_response_id: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[Tool] = []
    tool_choice: Literal["auto", "none", "required"] | NamedChoice = "auto"
    parallel_tool_calls: bool = True
    text: TextConfig | None = None
    user: str | None = None
    include: list[str] | None = None
    # Accepted and echoed: identifiers OpenAI uses for abuse detection and cache routing. vLLM's prefix
    # cache needs no key; they are kept on the response for the client's own bookkeeping.
    safety_identifier: str | None = Field(None, max_length=128)
    prompt_cache_key: str | None = Field(None, max_length=256)
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None  # breakpoints and lifetimes of OpenAI's cache: vLLM's needs none
    service_tier: Literal["auto", "default", "flex", "priority"] | None = None  # loop/service_tier.py
    truncation: Literal["auto", "disabled"] | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)  # alternatives per token; logprobs are returned when > 0
    client_metadata: dict[str, Any] | None = None  # Codex's, for OpenAI's telemetry: accepted, not used
    # Run on whatever the client does: answered at once as `queued`, then polled, resumed or cancelled.
    background: bool | None = None
    # The conversation the input and output are added to, and whose items the model reads first.
    conversation: Annotated[str, Field(min_length=1, max_length=128)] | ConversationRef | None = None
    prompt: Any = None
    context_management: list[ContextManagement] | None = Field(None, max_length=1)
    moderation: Any = None
    image: Any = None
    access_programs: Any = None
    background_options: Any = None

    @model_validator(mode="after")
    def _refuse_what_is_not_implemented(self) -> "ResponsesRequest":
        refuse_unsupported(self, UNSUPPORTED)
        if self.conversation is not None and self.previous_response_id is not None:
            raise bad_request(
                "Mutually exclusive parameters: provide either 'previous_response_id' or 'conversation', not both.",
                param="conversation",
                code="mutually_exclusive_parameters",
            )
        if self.background and not self.store:
            raise bad_request("Background mode requires 'store' to be true.", param="background")
        if not isinstance(self.input, str):
            for index, item in enumerate(self.input[:-1]):
                if isinstance(item, CompactionTriggerItem):
                    raise bad_request("A compaction_trigger item must be the last input item.", param=f"input[{index}]")
        return self

    @property
    def compacts(self) -> bool:
        """The request ends in a `compaction_trigger`: its response compacts the input and generates nothing else."""
        return not isinstance(self.input, str) and bool(self.input) and isinstance(self.input[-1], CompactionTriggerItem)

    def includes(self, value: str) -> bool:
        return value in (self.include or ())

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if isinstance(self.conversation, ConversationRef) else self.conversation


def refuse_unsupported(request: BaseModel, table: dict[str, str]) -> None:
    """A 400 for the first of the table's parameters the request sets to anything but absent or off."""
    for name, why in table.items():
        if getattr(request, name) not in (None, False):
            raise unsupported(name, why)


def unsupported(param: str, why: str) -> APIError:
    return bad_request(f"'{param}' is not supported by this gateway: {why}.", param=param, code="unsupported_parameter")
