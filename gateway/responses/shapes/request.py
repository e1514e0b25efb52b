"""The body of `POST /v1/responses`, validated. Every field of OpenAI's API is either honoured or refused
with a 400 that names it (README: "Compatibility"); an unknown field is a 400 too, as OpenAI answers it.
Wrong types and unknown roles, item types and tool types are 400s that name the field.

(Longer than one sitting on purpose: it is a flat list of the API's input shapes, one small model per
shape of the SDK's types, read by looking one up rather than end to end.)"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, PrivateAttr, Tag, field_validator, model_validator
from pydantic_core import PydanticCustomError

from connectors.namespaces import reserved_problem
from connectors.urls import shown

from ...core.models import Metadata, StrictModel
from ...errors import APIError, bad_request
from ...files.requested import AutoContainer
from .code_interpreter_models import CodeInterpreterCallItem
from .file_search_models import FileSearchCallItem, FileSearchTool, NamedFileSearch
from .shell_models import (
    ApplyPatchCallItem,
    ApplyPatchCallOutputItem,
    ApplyPatchTool,
    CallerRef,
    DirectCallers,
    LocalShellCallItem,
    LocalShellCallOutputItem,
    LocalShellTool,
    NamedApplyPatch,
    NamedShell,
    ShellCallItem,
    ShellCallOutputItem,
    ShellTool,
)
from .tool_search_models import ToolSearchCallItem, ToolSearchOutputItem, ToolSearchTool


class InputText(StrictModel):
    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: dict[str, Any] | None = Field(None, exclude=True)  # OpenAI's cache hint: vLLM caches prefixes itself


class OutputText(StrictModel):
    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]] = []  # sent back by clients that replay output items
    logprobs: list[dict[str, Any]] | None = None
    parsed: Any = Field(None, exclude=True)  # `responses.parse(...)`'s text, parsed: echoed, ignored


class ReasoningText(StrictModel):
    type: Literal["reasoning_text"]
    text: str


class SummaryText(StrictModel):
    type: Literal["summary_text"]
    text: str


class InputFile(StrictModel):
    """A file for the model to read, as text (gateway/files/inputs.py): an upload or inline data."""

    type: Literal["input_file"]
    file_id: str | None = Field(None, max_length=100)
    file_data: str | None = None
    filename: str | None = Field(None, max_length=255)
    file_url: str | None = None  # refused with a 400 that says so
    detail: Literal["auto", "low", "high"] | None = None  # how a file's images are rendered: gpt-oss reads none
    prompt_cache_breakpoint: dict[str, Any] | None = Field(None, exclude=True)  # OpenAI's cache hint: vLLM caches prefixes itself
    _text: str = PrivateAttr("")

    @property
    def text(self) -> str:
        return self._text

    def resolve(self, text: str) -> None:
        self._text = text


class RefusalPart(StrictModel):
    """An assistant message's refusal, sent back as it came: the model reads what it said."""

    type: Literal["refusal"]
    refusal: str

    @property
    def text(self) -> str:
        return self.refusal


ContentPart = Annotated[Union[InputText, OutputText, InputFile, RefusalPart], Field(discriminator="type")]
# What a function's output may hold besides a string: text, and files read as an input_file is (files/inputs.py).
OutputPart = Annotated[Union[InputText, InputFile], Field(discriminator="type")]


class MessageItem(StrictModel):
    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]
    # An assistant message's phase: "commentary" was a preamble, anything else a final answer.
    phase: Literal["commentary", "final_answer"] | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class CompactionItem(StrictModel):
    """A summary of earlier turns (compaction.py), sealed: the model reads it in place of what it replaced."""

    type: Literal["compaction"]
    encrypted_content: str = Field(min_length=1)
    id: str | None = None
    created_by: str | None = None
    _summary: str | None = PrivateAttr(None)  # the text, once unsealed (dialog_plan.py)


class ReasoningItem(StrictModel):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[SummaryText] = []
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None

    def text(self) -> str:
        parts = self.content if self.content else self.summary
        return "".join(part.text for part in parts)


class FunctionCallItem(StrictModel):
    type: Literal["function_call"]
    id: str | None = None
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    caller: CallerRef | None = None  # who made the call: the model ("direct") for every call made here
    parsed_arguments: Any = Field(None, exclude=True)  # the SDK helpers' parsed form: echoed, ignored

    @property
    def recipient(self) -> str:
        # A deferred top-level function is called in a namespace of its own name, as OpenAI writes it.
        namespace = self.namespace if self.namespace and self.namespace != self.name else "functions"
        return f"{namespace}.{self.name}"


class CustomToolCallItem(StrictModel):
    type: Literal["custom_tool_call"]
    id: str | None = None
    call_id: str
    name: str
    input: str
    namespace: str | None = None  # a custom tool of a `namespace` tool
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    caller: CallerRef | None = None

    @property
    def recipient(self) -> str:
        namespace = self.namespace if self.namespace and self.namespace != self.name else "functions"
        return f"{namespace}.{self.name}"


class CustomToolCallOutputItem(StrictModel):
    type: Literal["custom_tool_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[InputText]

    def text(self) -> str:
        return self.output if isinstance(self.output, str) else "".join(part.text for part in self.output)


class FunctionCallOutputItem(StrictModel):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[OutputPart]
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    caller: CallerRef | None = None
    name: str | None = None  # the function's, as the output names it (read by call_id)
    namespace: str | None = None

    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "".join(part.text for part in self.output)


class McpApprovalRequestItem(StrictModel):
    type: Literal["mcp_approval_request"]
    id: str
    server_label: str
    name: str
    arguments: str
    status: str | None = None


class McpApprovalResponseItem(StrictModel):
    type: Literal["mcp_approval_response"]
    id: str | None = None
    approval_request_id: str
    approve: bool
    reason: str | None = None


class McpListToolsItem(StrictModel):
    type: Literal["mcp_list_tools"]
    id: str | None = None
    server_label: str
    tools: list[dict[str, Any]] = []
    error: str | None = None


class McpCallItem(StrictModel):
    type: Literal["mcp_call"]
    id: str | None = None
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: str | None = None
    approval_request_id: str | None = None
    status: str | None = None


class WebSearchCallItem(StrictModel):
    """A browser call sent back as it came (clients that replay a response's output as input)."""

    type: Literal["web_search_call"]
    id: str | None = None
    status: str | None = None
    action: dict[str, Any] | None = None


class CompactionTriggerItem(StrictModel):
    """Compact what comes before it: the response's output is one `compaction` item (compaction.py). Only
    as the request's last input item."""

    type: Literal["compaction_trigger"]
    id: str | None = Field(None, max_length=128)


class AdditionalToolsItem(StrictModel):
    """Tools offered from this point of the conversation on (SDK 3.57): declared to the model where the item
    stands, callable from then on, kept with the conversation (tools/additional.py). Client tools here:
    functions, custom tools, namespaces; their definitions are checked as the request's own are."""

    type: Literal["additional_tools"]
    role: Literal["developer"] = "developer"
    tools: list[dict[str, Any]] = Field(min_length=1, max_length=128)
    id: str | None = Field(None, max_length=128)


class ConfigurationReasoning(StrictModel):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None


class ConfigurationFormat(StrictModel):
    """What a `configuration_update` may set the answer's format to: text, or a JSON schema."""

    type: Literal["text", "json_schema"]
    name: str | None = Field(None, max_length=64)
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class ConfigurationText(StrictModel):
    format: ConfigurationFormat


class ConfigurationUpdateItem(StrictModel):
    """Reasoning effort and the answer's format for what follows, until a later update replaces them
    (history/settings.py): kept with the conversation, read again when sent back."""

    type: Literal["configuration_update"]
    id: str | None = Field(None, max_length=128)
    reasoning: ConfigurationReasoning | None = None
    text: ConfigurationText | None = None


class ItemReference(StrictModel):
    """An item of a stored response, named by its id: read as the item itself (history/item_references.py)."""

    type: Literal["item_reference"]
    id: str = Field(min_length=1, max_length=128)


def _item_type(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type", "message")
        return kind if isinstance(kind, str) else str(kind)
    return getattr(value, "type", None)


# Items of OpenAI's API that nothing here can read, and why: refused by name.
UNSUPPORTED_ITEMS = {
    "program": "programmatic tool calling (a program that calls tools) is OpenAI's own; gpt-oss does not write programs",
    "program_output": "programmatic tool calling (a program that calls tools) is OpenAI's own; gpt-oss does not write programs",
}
# What clients put on items for their own bookkeeping, which OpenAI accepts and ignores (Codex's on every message).
IGNORED_ITEM_FIELDS = ("internal_chat_message_metadata_passthrough",)


def _item_as_sent(value: Any) -> Any:
    """An input item before it is read: a client's own bookkeeping dropped, an item nothing here reads refused."""
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    why = UNSUPPORTED_ITEMS.get(kind) if isinstance(kind, str) else None
    if why is not None:
        raise PydanticCustomError("unsupported_item", "'{kind}' items are not supported by this gateway: {why}", {"kind": value["type"], "why": why})
    if any(name in value for name in IGNORED_ITEM_FIELDS):
        value = {name: field for name, field in value.items() if name not in IGNORED_ITEM_FIELDS}
    return value


InputItem = Annotated[
    Union[
        Annotated[MessageItem, Tag("message")],
        Annotated[ReasoningItem, Tag("reasoning")],
        Annotated[FunctionCallItem, Tag("function_call")],
        Annotated[FunctionCallOutputItem, Tag("function_call_output")],
        Annotated[CustomToolCallItem, Tag("custom_tool_call")],
        Annotated[CustomToolCallOutputItem, Tag("custom_tool_call_output")],
        Annotated[McpApprovalRequestItem, Tag("mcp_approval_request")],
        Annotated[McpApprovalResponseItem, Tag("mcp_approval_response")],
        Annotated[McpListToolsItem, Tag("mcp_list_tools")],
        Annotated[McpCallItem, Tag("mcp_call")],
        Annotated[WebSearchCallItem, Tag("web_search_call")],
        Annotated[FileSearchCallItem, Tag("file_search_call")],
        Annotated[CodeInterpreterCallItem, Tag("code_interpreter_call")],
        Annotated[ShellCallItem, Tag("shell_call")],
        Annotated[ShellCallOutputItem, Tag("shell_call_output")],
        Annotated[LocalShellCallItem, Tag("local_shell_call")],
        Annotated[LocalShellCallOutputItem, Tag("local_shell_call_output")],
        Annotated[ApplyPatchCallItem, Tag("apply_patch_call")],
        Annotated[ApplyPatchCallOutputItem, Tag("apply_patch_call_output")],
        Annotated[ToolSearchCallItem, Tag("tool_search_call")],
        Annotated[ToolSearchOutputItem, Tag("tool_search_output")],
        Annotated[CompactionItem, Tag("compaction")],
        Annotated[CompactionTriggerItem, Tag("compaction_trigger")],
        Annotated[AdditionalToolsItem, Tag("additional_tools")],
        Annotated[ConfigurationUpdateItem, Tag("configuration_update")],
        Annotated[ItemReference, Tag("item_reference")],
    ],
    Discriminator(_item_type),
    BeforeValidator(_item_as_sent),
]


class FunctionDefinition(StrictModel):
    """A client-side function, as both APIs describe it."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(FunctionDefinition):
    type: Literal["function"]
    defer_loading: bool | None = None  # found with the `tool_search` tool, not declared up front
    allowed_callers: DirectCallers | None = None

    @property
    def recipient(self) -> str:
        return f"functions.{self.name}"


class TextInput(StrictModel):
    type: Literal["text"]


class GrammarInput(StrictModel):
    """What a custom tool's input must match: a Lark grammar (LALR) or a regular expression (RE2)."""

    type: Literal["grammar"]
    syntax: Literal["lark", "regex"]
    definition: str = Field(min_length=1, max_length=64 * 1024)


class CustomTool(StrictModel):
    """A client tool that takes raw text, not JSON (Codex's freeform apply_patch is one): declared to the
    model as a function of one string, streamed as a `custom_tool_call`."""

    type: Literal["custom"]
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    format: Annotated[Union[TextInput, GrammarInput], Field(discriminator="type")] | None = None
    defer_loading: bool | None = None
    allowed_callers: DirectCallers | None = None
    async_: Literal[False] | None = Field(None, alias="async")

    @property
    def recipient(self) -> str:
        return f"functions.{self.name}"


class NamespaceFunction(FunctionDefinition):
    """A function of a `namespace` tool; OpenAI's scheduling options for it are refused by name."""

    type: Literal["function"]
    defer_loading: bool | None = None
    allowed_callers: DirectCallers | None = None
    output_schema: None = None
    async_: Literal[False] | None = Field(None, alias="async")


class NamespaceTool(StrictModel):
    """Functions grouped under a name of their own: declared to the model as a Harmony namespace, called
    as `NAME.function`, answered by the client like any function."""

    type: Literal["namespace"]
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    description: str = ""
    # Functions, and custom tools (raw text in, called as NAME.tool, streamed as a `custom_tool_call`).
    tools: list[Annotated[Union[NamespaceFunction, CustomTool], Field(discriminator="type")]] = Field(min_length=1)


class CodeInterpreterTool(StrictModel):
    """The Harmony `python` tool, run in the gateway's sandbox. `container` is `{"type": "auto"}` (the
    conversation's container, made when code first runs) or the id of a container (the Containers API)."""

    type: Literal["code_interpreter"]
    container: str | AutoContainer = AutoContainer(type="auto")
    allowed_callers: DirectCallers | None = None


class UserLocation(StrictModel):
    type: Literal["approximate"] | None = None
    city: str | None = Field(None, max_length=200)
    country: str | None = Field(None, max_length=2)
    region: str | None = Field(None, max_length=200)
    timezone: str | None = Field(None, max_length=100)

    def describe(self) -> str | None:
        parts = [part for part in (self.city, self.region, self.country) if part]
        return ", ".join(parts) or None


class SearchFilters(StrictModel):
    allowed_domains: list[Annotated[str, Field(min_length=1, max_length=253)]] | None = Field(None, max_length=100)


WEB_SEARCH_TYPES = ("web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26")


class WebSearchTool(StrictModel):
    """gpt-oss's built-in `browser` (search, open, find), run by the gateway (tools/browser/)."""

    type: Literal["web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26"]
    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: UserLocation | None = None
    filters: SearchFilters | None = None
    external_web_access: Literal[True] | None = Field(None, description="cached-only search is not supported")

    def domains(self) -> tuple[str, ...]:
        """The allowed domains, as hosts (OpenAI accepts them with a scheme, which is dropped)."""
        found = self.filters.allowed_domains if self.filters and self.filters.allowed_domains else []
        return tuple(domain.lower().split("://", 1)[-1].split("/", 1)[0].removeprefix("www.") for domain in found)


class ToolNameFilter(StrictModel):
    tool_names: list[str] = []
    read_only: bool | None = None


class ApprovalFilter(StrictModel):
    always: ToolNameFilter | None = None
    never: ToolNameFilter | None = None


class McpTool(StrictModel):
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
    defer_loading: bool | None = None  # its tools found with the `tool_search` tool, not declared up front
    allowed_callers: DirectCallers | None = None

    @field_validator("server_label")
    @classmethod
    def _not_reserved(cls, label: str) -> str:
        problem = reserved_problem(label)
        if problem is not None:
            raise ValueError(problem)
        return label

    def allowed_names(self) -> set[str] | None:
        if self.allowed_tools is None:
            return None
        if isinstance(self.allowed_tools, ToolNameFilter):
            return set(self.allowed_tools.tool_names)
        return set(self.allowed_tools)

    def echo(self) -> dict[str, Any]:
        """The tool as the Response object shows it: credentials left out, the URL's among them."""
        shown_url = shown(self.server_url) if self.server_url is not None else None
        return self.model_dump(exclude={"authorization", "connector_id"}) | {"headers": None, "server_url": shown_url}


class UnavailableTool(BaseModel):
    """A tool of OpenAI's that nothing here runs. Refused by name, or dropped with a warning where the
    operator set `server.drop_unavailable_tools` (for clients that always declare them); never declared
    to the model."""

    model_config = ConfigDict(extra="allow")
    type: Literal[
        "computer",
        "computer_use_preview",
        "image_generation",
    ]


RequestTool = Union[
    FunctionTool,
    CustomTool,
    NamespaceTool,
    CodeInterpreterTool,
    McpTool,
    WebSearchTool,
    FileSearchTool,
    ShellTool,
    LocalShellTool,
    ApplyPatchTool,
    ToolSearchTool,
    UnavailableTool,
]
Tool = Annotated[RequestTool, Field(discriminator="type")]


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
