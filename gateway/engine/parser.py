"""From generated token ids to whole Harmony messages and the text deltas inside them.

This is the per-token path. A message is a header, `<|message|>`, its content, and a stop token. The
content's text is its tokens decoded as UTF-8, once per engine chunk (a character split across tokens
waits for its last token). The header's fields are read once per message, at `<|message|>`: for the
headers gpt-oss writes (`<|start|>assistant`, a channel, a recipient, a content type) from the header's
text, and for anything else by openai-harmony's `StreamableParser`, fed the header's tokens.

Why not feed every token to `StreamableParser`: openai-harmony 0.0.8 BPE-encodes `<|start|>` or
`<|message|>` again for every token it reads outside a message's content (~35 µs a token:
openai/harmony#142), and a new parser costs ~100 µs; a tool call's turn is half header tokens. The
parser here costs ~2 µs a token and nothing to create. tests/test_parser.py checks it against
`StreamableParser` on random streams, chunked at random.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openai_harmony import HarmonyError, Message, Role, StreamableParser

from . import harmony
from .harmony import CALL, END, MESSAGE, RETURN, START


class MalformedHarmony(Exception):
    """The model wrote something that is not Harmony; the response fails with this message."""


@dataclass(slots=True)
class MessageStarted:
    channel: str | None
    recipient: str | None
    content_type: str | None


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class MessageFinished:
    message: Message


ParsedEvent = MessageStarted | TextDelta | MessageFinished
_ENDS = frozenset((END, RETURN, CALL))
MAX_HEADER_TOKENS = 256  # a header is a few tokens; the model writing on and on in one is malformed
MAX_UNDECODED_TOKENS = 4  # a UTF-8 character spans 4 bytes at most: past that, the bytes are not UTF-8

# The headers gpt-oss writes, as text: `<|start|>assistant` (absent before the first message, whose
# header the prompt began), the recipient before or after the channel, and a content type, bare
# (`code`) or constrained (`<|constrain|>json`). Anything else is read by openai-harmony.
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_HEADER = re.compile(
    rf"(?P<start><\|start\|>assistant)?(?: to=(?P<before>{_NAME}))?<\|channel\|>(?P<channel>analysis|commentary|final)"
    rf"(?: to=(?P<after>{_NAME}))?(?: (?P<type>(?:<\|constrain\|>)?{_NAME}))?"
)


class HarmonyStreamParser:
    def __init__(self) -> None:
        self._head: list[int] = []  # the open header's tokens
        self._header: MessageStarted | None = None  # set while inside a message's content
        self._undecoded: list[int] = []  # content tokens ending in part of a UTF-8 character
        self._text: list[str] = []
        self._reasoning = False  # whether the open message is reasoning: analysis, addressed to no tool
        self._messages = 0  # messages begun: only the first may leave out `<|start|>assistant`
        self.reasoning_tokens = 0

    def feed(self, tokens: list[int]) -> list[ParsedEvent]:
        events: list[ParsedEvent] = []
        content: list[int] = []  # the open message's tokens of this chunk, decoded together
        for token in tokens:
            header = self._header
            if header is None:
                if token == MESSAGE:
                    header = self._read_header()
                    self._header, self._head = header, []
                    self._reasoning = header.channel == "analysis" and header.recipient is None
                    events.append(header)
                elif token in _ENDS:
                    raise MalformedHarmony("the model ended a message before writing its header")
                elif len(self._head) >= MAX_HEADER_TOKENS:
                    raise MalformedHarmony("the model's output is not valid Harmony: a message header does not end")
                else:
                    self._head.append(token)
            elif token in _ENDS:
                self._decode(content, events, final=True)
                content = []
                events.append(MessageFinished(self._finish(header)))
            else:
                if self._reasoning:  # a python call's code is on the analysis channel too, but is no reasoning
                    self.reasoning_tokens += 1
                content.append(token)
        if content:
            self._decode(content, events, final=False)
        return events

    def _read_header(self) -> MessageStarted:
        """The fields of the header just ended by `<|message|>`."""
        self._messages += 1
        text = harmony.encoding().decode(self._head)
        found = _HEADER.fullmatch(text)
        first = self._messages == 1
        if found is not None and (found["start"] is None) == first:
            recipient = found["before"] or found["after"]
            if not (found["before"] and found["after"]) and (recipient or not found["type"]):
                return MessageStarted(found["channel"], recipient, found["type"])
        if not first and self._head[:1] != [START]:
            raise MalformedHarmony(f"the model's output is not valid Harmony: a message does not begin with <|start|>: {text!r}")
        # The first message's header continues the prompt's `<|start|>assistant`; a later one names its role.
        parser = StreamableParser(harmony.encoding(), Role.ASSISTANT if first else None, strict=False)
        try:
            for token in [*self._head, MESSAGE]:
                parser.process(token)
        except HarmonyError as exc:
            raise MalformedHarmony(f"the model's output is not valid Harmony: {exc}") from None
        return MessageStarted(parser.current_channel, parser.current_recipient, parser.current_content_type)

    def _decode(self, tokens: list[int], events: list[ParsedEvent], final: bool) -> None:
        """The text of the content's tokens so far, as one delta; a character still missing its last
        bytes waits for the next chunk (at the message's end, or past 4 tokens, it is replaced)."""
        pending = self._undecoded + tokens if self._undecoded else tokens
        if not pending:
            return
        encoding = harmony.encoding()
        text: str | None = None
        for cut in range(len(pending), max(len(pending) - MAX_UNDECODED_TOKENS, 0) - 1, -1):
            if cut == 0:  # all of it is part of one character so far
                text = ""
                break
            try:
                text = encoding.decode_utf8(pending[:cut])
                break
            except HarmonyError:
                continue
        if text is None or final:  # not UTF-8, or the message ends: decoded as it is
            text, cut = encoding.decode(pending), len(pending)
        self._undecoded = pending[cut:]
        if text:
            events.append(TextDelta(text))
            self._text.append(text)

    @property
    def in_content(self) -> bool:
        """Whether the last token fed was inside a message's content (after `<|message|>`)."""
        return self._header is not None

    def _finish(self, header: MessageStarted) -> Message:
        message = Message.from_role_and_content(Role.ASSISTANT, "".join(self._text))
        if header.channel:
            message = message.with_channel(header.channel)
        if header.recipient:
            message = message.with_recipient(header.recipient)
        if header.content_type:
            message = message.with_content_type(header.content_type)
        self._header, self._text, self._undecoded = None, [], []
        return message

    def partial_message(self) -> Message | None:
        """The message cut off by the end of generation (max tokens), as far as it got."""
        if self._header is None:
            return None
        return self._finish(self._header)
