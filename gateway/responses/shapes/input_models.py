"""The items of a request's `input` (and of a conversation's items), one small model per shape of the SDK's
types: messages and their content parts, the items a client sends back, references, and the mid-conversation
items. An item type the gateway does not take is a 400 naming `input[i]`."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Discriminator, Field, PrivateAttr, Tag
from pydantic_core import PydanticCustomError

from ...core.models import StrictModel
from .code_interpreter_models import CodeInterpreterCallItem
from .file_search_models import FileSearchCallItem
from .shell_models import (
    ApplyPatchCallItem,
    ApplyPatchCallOutputItem,
    CallerRef,
    LocalShellCallItem,
    LocalShellCallOutputItem,
    ShellCallItem,
    ShellCallOutputItem,
)
from .tool_search_models import ToolSearchCallItem, ToolSearchOutputItem


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
    _summary: str | None = PrivateAttr(None)  # the text, once unsealed (loop/dialog_plan.py)


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
