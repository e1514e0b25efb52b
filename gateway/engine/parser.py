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

The model's output is hostile input like any other: gpt-oss writes stray special tokens and broken
headers. What can be read is recovered and what cannot is dropped (each said in `recovered`, for the
log): a second end token after a message (`<|end|><|call|>`), a header ended without `<|message|>`, text
or a repeated `<|start|>assistant` before a header, `assistant` written twice as the role, a recipient
written as the role, words after a header's content type, a message the model left unended when it began
the next (`<|start|>` or `<|channel|>` inside its content) or when it stopped (`unended`), and the answer
written with no header at all. A message whose header cannot be read at all is dropped whole. No special
token's text ever reaches a message's content. Only output with nothing readable in it is malformed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openai_harmony import HarmonyError, Message, Role, StreamableParser

from . import harmony
from .harmony import CALL, CHANNEL, END, MESSAGE, RETURN, START


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
FIRST_SPECIAL = 199998  # o200k_harmony's special tokens are this id and above
MAX_HEADER_TOKENS = 256  # a header is a few tokens; the model writing on and on in one is malformed
MAX_UNDECODED_TOKENS = 4  # a UTF-8 character spans 4 bytes at most: past that, the bytes are not UTF-8

# The headers gpt-oss writes, as text: `<|start|>assistant` (absent before the first message, whose
# header the prompt began), the recipient before or after the channel, and a content type, bare
# (`code`) or constrained (`<|constrain|>json`). Anything else is read by openai-harmony.
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_HEADER = re.compile(
    rf"(?:<\|start\|>(?:(?P<start>assistant)(?P<again>(?:assistant)+)?|(?P<role>{_NAME}))|(?P<lead>(?! to=)[^<]+?))?"
    rf"(?: to=(?P<before>{_NAME}))?<\|channel\|>(?P<channel>analysis|commentary|final)(?: to=(?P<after>{_NAME}))?"
    rf"(?:(?P<type> (?:<\|constrain\|>)?{_NAME}|<\|constrain\|>{_NAME})(?P<junk>\s[^<]*)?)?"
)


_RECIPIENT = re.compile(_NAME)


class HarmonyStreamParser:
    def __init__(self) -> None:
        self._head: list[int] = []  # the open header's tokens
        self._header: MessageStarted | None = None  # set while inside a message's content
        self._undecoded: list[int] = []  # content tokens ending in part of a UTF-8 character
        self._text: list[str] = []
        self._reasoning = False  # whether the open message is reasoning: analysis, addressed to no tool
        self._messages = 0  # messages begun: only the first may leave out `<|start|>assistant`
        self._unended = False  # the last message was ended by the next one's start (recovered)
        self._skipping = False  # inside a message whose header could not be read (dropped)
        self.reasoning_tokens = 0
        self.finished = 0  # messages read whole
        self.recovered: list[str] = []  # what the model wrote wrong, and how it was read or dropped

    def feed(self, tokens: list[int]) -> list[ParsedEvent]:
        events: list[ParsedEvent] = []
        content: list[int] = []  # the open message's tokens of this chunk, decoded together
        for token in tokens:
            header = self._header
            if header is None:
                if self._skipping:  # a message whose header could not be read, up to its end or the next's start
                    if token in _ENDS or token == START or token == CHANNEL:
                        self._skipping, self._head = False, [token] if token not in _ENDS else []
                elif token == MESSAGE:
                    header = self._read_header()
                    self._head = []
                    if header is None:
                        self._skipping = True
                        continue
                    self._header = header
                    self._reasoning = header.channel == "analysis" and header.recipient is None
                    events.append(header)
                elif token in _ENDS:
                    events += self._stray_end(token)
                elif len(self._head) >= MAX_HEADER_TOKENS:
                    raise MalformedHarmony("the model's output is not valid Harmony: a message header does not end")
                else:
                    self._head.append(token)
            elif token in _ENDS:
                self._decode(content, events, final=True)
                content = []
                events.append(MessageFinished(self._finish(header)))
            elif token >= FIRST_SPECIAL:  # a special token inside a message: never its text
                if token == START or token == CHANNEL:  # the next message began before this one ended
                    self._decode(content, events, final=True)
                    content = []
                    events.append(MessageFinished(self._finish(header)))
                    self._head, self._unended = [token], True
                    self.recovered.append("ended a message the model left open when it began the next")
                else:
                    self.recovered.append(f"dropped {harmony.encoding().decode([token])} inside a message")
            else:
                if self._reasoning:  # a python call's code is on the analysis channel too, but is no reasoning
                    self.reasoning_tokens += 1
                content.append(token)
        if content:
            self._decode(content, events, final=False)
        return events

    def _stray_end(self, token: int) -> list[ParsedEvent]:
        """An end token where no message is open: a header the model gave up (dropped), the answer written
        with no header at all (`Hi there.<|return|>`: read as the final answer), or a second end."""
        if self._head:
            head, self._head = self._head, []
            text = harmony.encoding().decode(head)
            if token == RETURN and max(head) < FIRST_SPECIAL:
                self.recovered.append("read text with no header, ended by <|return|>, as the final answer")
                self._messages += 1
                header = MessageStarted("final", None, None)
                self._text = [text]
                return [header, TextDelta(text), MessageFinished(self._finish(header))]
            self.recovered.append(f"dropped a message header ended without <|message|>: {text!r}")
        elif self._messages == 0:
            raise MalformedHarmony("the model ended a message before writing its header")
        else:
            self.recovered.append("dropped an end token after a message that had ended")
        return []

    def _read_header(self) -> MessageStarted | None:
        """The fields of the header just ended by `<|message|>`: read as gpt-oss writes them, else by
        openai-harmony; a header neither reads cleanly is read as far as it makes sense, and said so."""
        self._messages += 1
        head, encoding = self._head, harmony.encoding()
        last_start = len(head) - 1 - head[::-1].index(START) if START in head else -1
        if last_start > 0:  # text, or another `<|start|>assistant`, before this message's own start
            self.recovered.append(f"dropped {encoding.decode(head[:last_start])!r} before a message header")
            head = head[last_start:]
        doubled = [i for i in range(1, len(head)) if head[i] == CHANNEL and head[i - 1] == CHANNEL]
        if doubled:  # `<|channel|><|channel|>commentary`
            self.recovered.append("read a header whose <|channel|> was written twice")
            head = [token for i, token in enumerate(head) if i not in doubled]
        text = encoding.decode(head)
        found = _HEADER.fullmatch(text)
        first, unended, self._unended = self._messages == 1, self._unended, False
        named = [name for name in (found["before"], found["after"], found["role"]) if name] if found is not None else []
        recipient = named[0] if len(named) == 1 else None
        if found is not None and not found["lead"] and len(named) <= 1 and (recipient or not found["type"]):
            if found["start"] is None and found["role"] is None and not first and not unended:
                self.recovered.append(f"read a message that does not begin with <|start|>: {text!r}")
            return self._started(found, recipient)
        try:
            if not first and head[:1] != [START] and not unended:
                raise HarmonyError("a message does not begin with <|start|>")
            # The first message's header continues the prompt's `<|start|>assistant`; a later one names its role.
            parser = StreamableParser(encoding, Role.ASSISTANT if head[:1] != [START] else None, strict=False)
            for token in [*head, MESSAGE]:
                parser.process(token)
            read = parser.current_recipient
            if read is None or _RECIPIENT.fullmatch(read) or found is None:
                return MessageStarted(parser.current_channel, read, parser.current_content_type)
        except HarmonyError as exc:  # a header openai-harmony cannot read either: its message is dropped
            if found is None:
                self.recovered.append(f"dropped a message whose header cannot be read ({exc}): {text!r}")
                return None
        self.recovered.append(f"read the header {text!r} as far as it makes sense")
        return self._started(found, recipient)

    def _started(self, found: re.Match[str], recipient: str | None) -> MessageStarted:
        for part, where in (("lead", "before"), ("junk", "after a content type in"), ("again", "after <|start|>assistant in")):
            if found[part]:
                self.recovered.append(f"dropped {found[part]!r} {where} a message header")
        if found["role"]:  # `<|start|>functions.f<|channel|>…`: the recipient written where the role belongs
            self.recovered.append(f"read the role {recipient!r} a header names as its recipient")
        content_type = found["type"].lstrip() if found["type"] else None
        return MessageStarted(found["channel"], recipient, content_type)

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
        self.finished += 1
        return message

    def unended(self) -> MessageFinished | None:
        """The message open when the engine stopped on its own (not at max tokens): the model ended its turn
        without the message's end token (`<|call|>`, `<|return|>`), so the message is whole as it is."""
        if self._header is None:
            return None
        self.recovered.append("ended a message the model did not end with an end token")
        return MessageFinished(self._finish(self._header))

    def partial_message(self) -> Message | None:
        """The message cut off by the end of generation (max tokens), as far as it got."""
        if self._header is None:
            return None
        return self._finish(self._header)
