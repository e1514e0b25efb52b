"""The content blocks of a Messages request, one small model per block type, as the anthropic SDK types
them (`anthropic/types/*_block_param.py`): what a user, an assistant (its turns given back) and a tool
result may hold. Blocks gpt-oss cannot read are refused by name where the request is translated
(translate.py), not here, so that the error names the block's place."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag

from ..core.models import StrictModel

# What a client may put on any block and the gateway reads nowhere: vLLM caches prefixes by itself, and
# citations it is given back are the client's copy of what it was sent.
CacheControl = dict[str, Any] | None


class TextBlock(StrictModel):
    type: Literal["text"]
    text: str
    cache_control: CacheControl = None
    citations: list[dict[str, Any]] | None = None


class ThinkingBlock(StrictModel):
    """A thinking block given back: its `signature` is the sealed analysis the gateway handed out."""

    type: Literal["thinking"]
    thinking: str
    signature: str = Field(max_length=4 * 1024 * 1024)
    cache_control: CacheControl = None


class RedactedThinkingBlock(StrictModel):
    type: Literal["redacted_thinking"]
    data: str = Field(max_length=4 * 1024 * 1024)
    cache_control: CacheControl = None


class ToolUseBlock(StrictModel):
    type: Literal["tool_use"]
    id: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=128)
    input: Any = None  # an object; a client's unparsable one comes back as `{"__unparsedToolInput": ...}`
    cache_control: CacheControl = None
    caller: dict[str, Any] | None = None
    toolset_name: str | None = Field(None, max_length=128)


class ToolReferenceBlock(StrictModel):
    """A tool search's answer: the named tool (declared with `defer_loading`) becomes callable."""

    type: Literal["tool_reference"]
    tool_name: str = Field(min_length=1, max_length=128)
    cache_control: CacheControl = None


class SearchResultBlock(StrictModel):
    type: Literal["search_result"]
    source: str = Field(max_length=4096)
    title: str = Field(max_length=4096)
    content: list[TextBlock] = Field(max_length=1000)
    cache_control: CacheControl = None
    citations: dict[str, Any] | None = None


class DocumentBlock(StrictModel):
    """A document: plain text, text blocks, or a base64 PDF (read as the Responses API's `input_file`)."""

    type: Literal["document"]
    source: dict[str, Any]
    title: str | None = Field(None, max_length=4096)
    context: str | None = None
    cache_control: CacheControl = None
    citations: dict[str, Any] | None = None


class OtherBlock(StrictModel, extra="allow"):
    """A block of a type the gateway does not take (an image, a container upload, ...): kept so that the
    translation can refuse it by name and place."""

    type: str = Field(max_length=64)


def _block_type(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _TAKEN else "other"


ToolResultContent = Annotated[
    Union[
        Annotated[TextBlock, Tag("text")],
        Annotated[ToolReferenceBlock, Tag("tool_reference")],
        Annotated[SearchResultBlock, Tag("search_result")],
        Annotated[DocumentBlock, Tag("document")],
        Annotated[OtherBlock, Tag("other")],
    ],
    Discriminator(_block_type),
]


class ToolResultBlock(StrictModel):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1, max_length=256)
    content: str | list[ToolResultContent] = ""
    is_error: bool = False
    cache_control: CacheControl = None
    toolset_name: str | None = None


Block = Annotated[
    Union[
        Annotated[TextBlock, Tag("text")],
        Annotated[ThinkingBlock, Tag("thinking")],
        Annotated[RedactedThinkingBlock, Tag("redacted_thinking")],
        Annotated[ToolUseBlock, Tag("tool_use")],
        Annotated[ToolResultBlock, Tag("tool_result")],
        Annotated[ToolReferenceBlock, Tag("tool_reference")],
        Annotated[SearchResultBlock, Tag("search_result")],
        Annotated[DocumentBlock, Tag("document")],
        Annotated[OtherBlock, Tag("other")],
    ],
    Discriminator(_block_type),
]

_TAKEN = frozenset(
    {"text", "thinking", "redacted_thinking", "tool_use", "tool_result", "tool_reference", "search_result", "document"}
)  # fmt: skip

Content = str | list[Block]


class UserMessage(StrictModel):
    role: Literal["user"]
    content: Content


class AssistantMessage(StrictModel):
    role: Literal["assistant"]
    content: Content


class SystemTurn(StrictModel, extra="allow"):
    """A `system` turn among the messages, as Claude Code sends them (its reminders; it may carry fields
    of its own, read by nothing here): developer instructions from that point on."""

    role: Literal["system"]
    content: str | list[dict[str, Any]]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n\n".join(block["text"] for block in self.content if block.get("type") == "text" and isinstance(block.get("text"), str))


def _role(value: Any) -> str | None:
    return value.get("role") if isinstance(value, dict) else getattr(value, "role", None)


Message = Annotated[
    Union[Annotated[UserMessage, Tag("user")], Annotated[AssistantMessage, Tag("assistant")], Annotated[SystemTurn, Tag("system")]],
    Discriminator(_role),
]
