"""The messages of a Chat Completions request, one small model per role and content part, as the openai
SDK types them (`ChatCompletionMessageParam`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag

from ..core.models import StrictModel

# A participant's name (OpenAI: "an optional name for the participant"). Accepted on every message that
# has one, and not rendered: Harmony's format has no names for system, developer, user or assistant
# (openai-harmony renders `<|start|>user:NAME` but its own parser refuses that role), so gpt-oss was not
# taught to read one there, and prefixing it to the text would change what the model reads.
ParticipantName = Annotated[str | None, Field(None, max_length=256)]
# Fields that clients send back inside messages they replayed, read by nothing here: LiteLLM's
# `provider_specific_fields`, the openai SDK's parsed forms (`parsed`, `parsed_arguments`).
Echoed = Any


class CacheBreakpoint(StrictModel):
    mode: Literal["explicit"]
    ttl: Literal["30m", "12h"] | None = None


class TextPart(StrictModel):
    type: Literal["text"]
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = None  # vLLM caches prefixes by itself: no effect


class FileData(StrictModel):
    file_id: str | None = Field(None, max_length=100)
    file_data: str | None = None
    filename: str | None = Field(None, max_length=255)


class FilePart(StrictModel):
    """A file for the model to read as text: the Responses API's `input_file` (gateway/files/inputs.py)."""

    type: Literal["file"]
    file: FileData
    prompt_cache_breakpoint: CacheBreakpoint | None = None


Content = str | list[TextPart]
UserContent = str | list[Annotated[Union[TextPart, FilePart], Field(discriminator="type")]]


def text_of(content: Content | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)


def user_content(content: UserContent) -> str | list[dict[str, Any]]:
    """A user message's content as Responses input: text, or parts with its files as `input_file`."""
    if isinstance(content, str) or not any(isinstance(part, FilePart) for part in content):
        return text_of(content)  # type: ignore[arg-type]
    return [
        {"type": "input_text", "text": part.text} if isinstance(part, TextPart) else {"type": "input_file", **part.file.model_dump(exclude_none=True)}
        for part in content
    ]


class SystemMessage(StrictModel):
    role: Literal["system", "developer"]
    content: Content
    name: ParticipantName = None
    provider_specific_fields: Echoed = None


class UserMessage(StrictModel):
    role: Literal["user"]
    content: UserContent
    name: ParticipantName = None
    provider_specific_fields: Echoed = None


class FunctionCall(StrictModel):
    name: str = Field(min_length=1)
    arguments: str
    parsed_arguments: Echoed = None  # `chat.completions.stream(...)`'s message, sent back as it came


class ToolCall(StrictModel):
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall
    index: int | None = None  # a streamed call's place, kept by clients that join the deltas themselves
    provider_specific_fields: Echoed = None


class CustomCall(StrictModel):
    name: str = Field(min_length=1)
    input: str


class CustomToolCall(StrictModel):
    """A call of a custom tool: raw text, not JSON (the Responses API's `custom_tool_call`)."""

    id: str = Field(min_length=1)
    type: Literal["custom"]
    custom: CustomCall
    index: int | None = None
    provider_specific_fields: Echoed = None


def _call_type(value: Any) -> str:
    return (value.get("type") if isinstance(value, dict) else getattr(value, "type", None)) or "function"


AnyToolCall = Annotated[Union[Annotated[ToolCall, Tag("function")], Annotated[CustomToolCall, Tag("custom")]], Discriminator(_call_type)]


class AssistantMessage(StrictModel):
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[AnyToolCall] | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None  # the older name of `reasoning`
    # What clients send back when they replay a completion's message as it came: empty is accepted.
    refusal: None = None
    annotations: list[Any] | None = Field(None, max_length=0)
    audio: None = None
    function_call: None = None
    name: ParticipantName = None
    parsed: Echoed = None  # `chat.completions.parse(...)`'s message: its content, parsed
    provider_specific_fields: Echoed = None


class ToolMessage(StrictModel):
    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1)
    content: Content
    name: ParticipantName = None  # the function's name, as some clients write it
    provider_specific_fields: Echoed = None


def _role(value: Any) -> str | None:
    if isinstance(value, dict):
        role = value.get("role")
        return "system" if role == "developer" else role
    return getattr(value, "role", None)


ChatMessage = Annotated[
    Union[
        Annotated[SystemMessage, Tag("system")],
        Annotated[UserMessage, Tag("user")],
        Annotated[AssistantMessage, Tag("assistant")],
        Annotated[ToolMessage, Tag("tool")],
    ],
    Discriminator(_role),
]
