"""The Harmony encoding, its special token ids, and how requests become system and developer messages."""

from __future__ import annotations

import datetime
import functools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from openai_harmony import (
    Author,
    Conversation,
    DeveloperContent,
    HarmonyEncoding,
    HarmonyEncodingName,
    Message,
    ReasoningEffort,
    Role,
    SystemContent,
    TextContent,
    ToolDescription,
    ToolNamespaceConfig,
    load_harmony_encoding,
)

from runtime.text_runs import has_long_run, pieces

from .vocab import ensure_vocabulary

# Special tokens of the gpt-oss vocabulary (checked against the encoding in tests).
RETURN = 200002  # <|return|>: the final answer is finished
CONSTRAIN = 200003
CHANNEL = 200005
START = 200006
END = 200007
MESSAGE = 200008  # <|message|>: the header is complete, content follows
CALL = 200012  # <|call|>: a tool call waits for its result
STOP_TOKEN_IDS = (RETURN, CALL)
VOCAB_SIZE = 201088  # gpt-oss's vocabulary (its config's vocab_size): a token id the engine sends is below it

_EFFORTS = {
    "low": ReasoningEffort.LOW,
    "medium": ReasoningEffort.MEDIUM,
    "high": ReasoningEffort.HIGH,
}


@functools.cache
def encoding() -> HarmonyEncoding:
    ensure_vocabulary()
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def reasoning_effort(effort: str | None) -> ReasoningEffort:
    """gpt-oss knows low, medium and high; the API's other levels map to the nearest one."""
    if effort in (None, "medium"):
        return ReasoningEffort.MEDIUM
    if effort in ("none", "minimal", "low"):
        return ReasoningEffort.LOW
    return ReasoningEffort.HIGH  # high, xhigh, max


@dataclass
class Preamble:
    """What the gateway puts before the dialog: the system message and, when needed, a developer message."""

    effort: str | None = None
    instructions: str | None = None
    function_tools: list[ToolDescription] = field(default_factory=list)
    namespaces: list[ToolNamespaceConfig] = field(default_factory=list)
    # The client's own namespaces of functions (`namespace` tools), declared after `functions`.
    function_namespaces: list[ToolNamespaceConfig] = field(default_factory=list)
    response_format: tuple[str, dict[str, Any]] | None = None  # (name, JSON schema)

    def messages(self) -> list[Message]:
        system = (
            SystemContent.new().with_reasoning_effort(reasoning_effort(self.effort)).with_conversation_start_date(datetime.date.today().isoformat())
        )
        for namespace in self.namespaces:
            system = system.with_tools(namespace)
        result = [Message.from_role_and_content(Role.SYSTEM, system)]

        instructions = self.instructions or ""
        if self.response_format is not None:
            name, schema = self.response_format
            section = f"# Response Formats\n\n## {name}\n\n{json.dumps(schema, separators=(',', ':'))}"
            instructions = f"{instructions}\n\n{section}" if instructions else section
        if instructions or self.function_tools or self.function_namespaces:
            developer = DeveloperContent.new()
            if instructions:
                developer = developer.with_instructions(instructions)
            if self.function_tools:
                developer = developer.with_function_tools(self.function_tools)
            for namespace in self.function_namespaces:
                developer = developer.with_tools(namespace)
            result.append(Message.from_role_and_content(Role.DEVELOPER, developer))
        return result


def declarations_text(namespaces: list[ToolNamespaceConfig]) -> str:
    """Namespaces of tools written as the model reads them in a developer message's `# Tools` section:
    Harmony's own rendering, for tools declared later in the dialog (tool search's answer)."""
    developer = DeveloperContent.new()
    for namespace in namespaces:
        developer = developer.with_tools(namespace)
    rendered: str = encoding().decode_utf8(encoding().render(Message.from_role_and_content(Role.DEVELOPER, developer)))
    body = rendered.partition("<|message|>")[2].removesuffix("<|end|>")
    return body.removeprefix("# Tools").strip("\n")


def render_prompt(preamble: Preamble, dialog: list[Message]) -> list[int]:
    """Token ids of the whole conversation, ending with `<|start|>assistant` for the model to continue.

    Harmony's renderer drops the analysis of turns that ended in a final answer and keeps the chain of
    thought of the turn in progress.
    """
    return render_messages(preamble.messages() + dialog)


# Prompts with more text than this are tokenised in the renderer's process (see PromptRenderer).
INLINE_RENDER_CHARS = 16 * 1024


ASSISTANT_START = (START, 173781)  # `<|start|>assistant`, where every prompt ends (checked in tests)


@dataclass(frozen=True)
class Prompt:
    """A prompt's token ids as the JSON the engine is sent (`1,2,3`, without brackets), and how many. A
    long prompt goes to the engine again on every turn of a run: its JSON is made once, off the event
    loop, and each turn only appends the new messages' ids."""

    json: str
    length: int

    @classmethod
    def of(cls, ids: list[int]) -> "Prompt":
        return cls(",".join(map(str, ids)), len(ids))

    def __len__(self) -> int:
        return self.length

    def __add__(self, more: "Prompt | list[int]") -> "Prompt":
        if not isinstance(more, Prompt):
            more = Prompt.of(more)
        if not more.length:
            return self
        return Prompt(f"{self.json},{more.json}" if self.json else more.json, self.length + more.length)

    @classmethod
    def join(cls, pieces: "list[Prompt]") -> "Prompt":
        return cls(",".join(piece.json for piece in pieces if piece.length), sum(piece.length for piece in pieces))

    def without_last(self, count: int) -> "Prompt":
        """The prompt without its last `count` ids (found from the end: no work for the ids before)."""
        cut = len(self.json)
        for _ in range(count):
            cut = self.json.rfind(",", 0, cut)
        return Prompt(self.json[: max(cut, 0)], self.length - count)

    def ids(self) -> list[int]:
        return [int(token) for token in self.json.split(",")] if self.json else []


class MessageRenderer(Protocol):
    """What a GrowingPrompt renders with (renderer.py's PromptRenderer, bound to a tenant)."""

    async def each(self, messages: list[Message]) -> list[Prompt]: ...

    async def preamble(self, preamble: Preamble) -> Prompt: ...


def dropped_analysis(dialog: list[Message]) -> set[int]:
    """The analysis messages Harmony leaves out of a rendered conversation (`auto_drop_analysis`), by index:
    when the last assistant message is a final answer, those before the first final answer; else none.
    (Measured on openai-harmony's renderer; tests/test_harmony.py checks it on random conversations.)"""
    last = next((message for message in reversed(dialog) if message.author.role == Role.ASSISTANT), None)
    if last is None or last.channel != "final":  # found near the end: a turn in progress costs nothing here
        return set()
    assistant = [(index, message.channel) for index, message in enumerate(dialog) if message.author.role == Role.ASSISTANT]
    first_final = next(index for index, channel in assistant if channel == "final")
    return {index for index, channel in assistant if index < first_final and channel == "analysis"}


@dataclass(frozen=True)
class PromptState:
    """A run's prompt as it ended, for a run that continues it in the same process (a WebSocket's next
    response): each message's tokens, and the prompt up to the run's last engine call with what it was
    decided from (the preamble, the analysis dropped)."""

    pieces: list[Prompt | None]
    preamble: Preamble | None = None
    history: Prompt | None = None
    rendered: int = 0
    dropped: frozenset[int] = frozenset()


class GrowingPrompt:
    """The prompt of one run, turn after turn, from each message's tokens.

    A message renders to the same tokens wherever it stands in a conversation, so the prompt is the
    preamble's tokens, then each message's, less the analysis Harmony drops. A message's tokens are
    rendered once: the tokens of the messages a stored response continues are kept with it (`seed`),
    and each turn renders only what the run added (the model's messages, the tools' results). A request
    costs the gateway the size of what is new, not of the context.

    Which analysis Harmony drops depends on the whole conversation (only while the last assistant
    message is a final answer), so deciding it again on a later turn would bring back analysis the
    first turn dropped, rewriting the past and missing the engine's prefix cache. The past is therefore
    decided once per run, as the first turn saw it.
    """

    def __init__(self, renderer: MessageRenderer, counted: Callable[[str, int], None] | None = None) -> None:
        self._renderer = renderer
        self._counted = counted or (lambda source, tokens: None)  # tokens "rendered" or "reused", for the metrics
        self._pieces: list[Prompt | None] = []  # each dialog message's tokens, where known
        self._history: Prompt | None = None  # the prompt without its closing `<|start|>assistant`
        self._preamble: Preamble | None = None
        self._rendered = 0  # dialog messages in `_history`
        self._dropped: frozenset[int] = frozenset()  # the analysis `_history` leaves out
        self._carried: PromptState | None = None  # the prompt of the run this one continues, in memory

    def seed(self, pieces: list[str | None]) -> None:
        """The tokens (as `Prompt.json`) of the dialog's first messages, where known."""
        self._pieces = [None if piece is None else Prompt(piece, piece.count(",") + 1 if piece else 0) for piece in pieces]

    def adopt(self, state: PromptState) -> None:
        """The prompt of the run this one continues, kept in memory (`state()`): its messages' tokens, and
        its whole prompt, which the first render goes on from when nothing it was decided from changed."""
        self._pieces, self._carried = list(state.pieces), state

    def state(self) -> PromptState:
        """This run's prompt, for a run that continues it in the same process."""
        return PromptState(list(self._pieces), self._preamble, self._history, self._rendered, self._dropped)

    def pieces(self, start: int) -> list[str | None]:
        """The tokens of the dialog's messages from `start` on, as `seed` takes them (None: not rendered)."""
        return [None if piece is None else piece.json for piece in self._pieces[start:]]

    async def render(self, preamble: Preamble, dialog: list[Message]) -> Prompt:
        if self._carried is not None:
            self._go_on_from(self._carried, preamble, dialog)
        if self._history is None or preamble is not self._preamble or len(dialog) < self._rendered:
            dropped = dropped_analysis(dialog)
            self._dropped = frozenset(dropped)
            self._align(dialog)
            missing = [index for index, piece in enumerate(self._pieces) if piece is None and index not in dropped]
            reused = sum(piece.length for index, piece in enumerate(self._pieces) if piece is not None and index not in dropped)
            await self._fill(dialog, missing)
            head = await self._renderer.preamble(preamble)
            kept = [piece for index, piece in enumerate(self._pieces) if index not in dropped and piece is not None]
            self._history, self._preamble = head + Prompt.join(kept), preamble
            self._counted("reused", reused)
            self._counted("rendered", self._history.length - reused)
        elif len(dialog) > self._rendered:
            start = len(self._pieces)
            self._align(dialog)
            await self._fill(dialog, list(range(start, len(dialog))))
            added = self._pieces[self._rendered : len(dialog)]
            self._history += Prompt.join([piece for piece in added if piece is not None])
            self._counted("rendered", sum(piece.length for piece in added if piece is not None))
        self._rendered = len(dialog)
        return self._history + list(ASSISTANT_START)

    def _go_on_from(self, carried: PromptState, preamble: Preamble, dialog: list[Message]) -> None:
        """The carried prompt, as this run's first, where a render from scratch would give the same tokens:
        the same preamble (and so the same date in it: a socket's session keeps the date it started
        with, as one run does) and the same analysis dropped; then only the new messages are added."""
        self._carried = None
        if carried.history is None or carried.preamble != preamble or carried.rendered > len(dialog):
            return
        if dropped_analysis(dialog) != carried.dropped:
            return
        self._history, self._preamble, self._rendered, self._dropped = carried.history, preamble, carried.rendered, carried.dropped
        self._counted("reused", carried.history.length)

    async def complete(self, dialog: list[Message], start: int) -> None:
        """Render what no turn did (the last turn's answer) from `start` on, so that a response stores
        the tokens of every message it adds and its continuation renders none of them again."""
        self._align(dialog)
        missing = [index for index in range(start, len(dialog)) if self._pieces[index] is None]
        await self._fill(dialog, missing)
        self._counted("rendered", sum(piece.length for index in missing if (piece := self._pieces[index]) is not None))

    def _align(self, dialog: list[Message]) -> None:
        """One piece a dialog message: unknown for messages not seen yet, none for messages gone."""
        del self._pieces[len(dialog) :]
        self._pieces += [None] * (len(dialog) - len(self._pieces))

    async def _fill(self, dialog: list[Message], indices: list[int]) -> None:
        if not indices:
            return
        for index, piece in zip(indices, await self._renderer.each([dialog[index] for index in indices])):
            self._pieces[index] = piece


def _part_text(part: Any) -> str:
    """The text of a message's part: a text part's, or a system or developer message's instructions."""
    return getattr(part, "text", None) or getattr(part, "instructions", None) or ""


def text_size(messages: list[Message]) -> int:
    return sum(len(_part_text(part)) for message in messages for part in message.content)


def render_messages(messages: list[Message]) -> list[int]:
    if any(_has_long_run(message) for message in messages):
        return _render_in_pieces(messages)
    tokens: list[int] = encoding().render_conversation_for_completion(Conversation.from_messages(messages), Role.ASSISTANT)
    return tokens


# Runs of one character class longer than this are cut before the tokenizer sees them (runtime/text_runs.py),
# every CUT_EVERY characters (a multiple of 128: a run of one repeated character keeps its tokens).
MAX_RUN_CHARS = 4096
CUT_EVERY = 2048


class UnrenderableText(Exception):
    """A system or developer message, or one of several parts, has a run the tokenizer cannot take."""


def encode_text(text: str) -> list[int]:
    """A text's tokens, its long runs cut first: linear in the text, where BPE alone is quadratic in a run."""
    encode = encoding().encode
    parts = pieces(text, MAX_RUN_CHARS, CUT_EVERY)
    if len(parts) == 1:
        whole: list[int] = encode(text, allowed_special=(), disallowed_special=())
        return whole
    return [token for part in parts for token in encode(part, allowed_special=(), disallowed_special=())]


def _has_long_run(message: Message) -> bool:
    return any(has_long_run(_part_text(part), MAX_RUN_CHARS) for part in message.content)


def _render_in_pieces(messages: list[Message]) -> list[int]:
    """The conversation as its head (the system and developer messages, rendered together) and each later
    message on its own, less the analysis Harmony drops: the tokens Harmony's whole render gives (as
    GrowingPrompt builds every prompt), with each message's long runs cut."""
    split = next((index for index, message in enumerate(messages) if message.author.role not in (Role.SYSTEM, Role.DEVELOPER)), len(messages))
    head, dialog = messages[:split], messages[split:]
    if any(_has_long_run(message) for message in head):
        raise UnrenderableText("the instructions or tools have a run of one kind of character too long to tokenise")
    dropped = dropped_analysis(dialog)
    tokens = render_messages(head)[: -len(ASSISTANT_START)] if head else []
    for index, message in enumerate(dialog):
        if index not in dropped:
            tokens += render_message(message)
    return [*tokens, *ASSISTANT_START]


def render_dicts(messages: list[dict[str, Any]]) -> Prompt:
    return Prompt.of(render_messages([Message.from_dict(message) for message in messages]))


def render_each(messages: list[Message]) -> list[Prompt]:
    return [Prompt.of(render_message(message)) for message in messages]


def render_message(message: Message) -> list[int]:
    """Harmony's render of one message, made fast for the messages of every turn (a tool's result, the
    model's call and answer, the user's text).

    openai-harmony 0.0.8 renders each formatting token of a message with a whole BPE encode (~30 µs each,
    ~150 µs a message: openai/harmony#142), and its `encode` rebuilds the set of disallowed special
    tokens on every call (~1.6 ms). A message of one text part renders as the tokens of its header (Harmony's
    own render of the same message with no text, once per kind of header) around its text's tokens,
    which start and end at special tokens and so are encoded on their own (long runs cut: encode_text). tests/test_harmony.py checks
    this against `render` on random messages; anything else goes to `render`."""
    content = message.content
    if len(content) != 1 or not isinstance(content[0], TextContent) or message.author.role in (Role.SYSTEM, Role.DEVELOPER):
        if _has_long_run(message):
            raise UnrenderableText("a message of several parts has a run of one kind of character too long to tokenise")
        rendered: list[int] = encoding().render(message)
        return rendered
    head, tail = _frame(message.author.role, message.author.name, message.channel, message.recipient, message.content_type)
    return [*head, *encode_text(content[0].text), *tail]


@functools.lru_cache(maxsize=1024)  # headers name model-written recipients: bounded
def _frame(
    role: Role, name: str | None, channel: str | None, recipient: str | None, content_type: str | None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A message's tokens before its text (through `<|message|>`) and after it."""
    empty = Message(
        author=Author(role=role, name=name), content=[TextContent(text="")], channel=channel, recipient=recipient, content_type=content_type
    )
    tokens: list[int] = encoding().render(empty)
    split = len(tokens) - tokens[::-1].index(MESSAGE)
    return tuple(tokens[:split]), tuple(tokens[split:])


def render_each_dicts(messages: list[dict[str, Any]]) -> list[Prompt]:
    return render_each([Message.from_dict(message) for message in messages])


def render_head(messages: list[Message]) -> Prompt:
    return Prompt.of(render_messages(messages)[: -len(ASSISTANT_START)])


def render_head_dicts(messages: list[dict[str, Any]]) -> Prompt:
    return render_head([Message.from_dict(message) for message in messages])


__all__ = [
    "GrowingPrompt",
    "PromptState",
    "Message",
    "Preamble",
    "Prompt",
    "MessageRenderer",
    "dropped_analysis",
    "Role",
    "ToolDescription",
    "ToolNamespaceConfig",
    "encoding",
    "render_prompt",
]
