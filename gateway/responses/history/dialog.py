"""The dialog a response runs on (Harmony messages and the conversation's tool state), and what every
reader of input items shares: a call sent back, its output matched to it, the records the API lists.

Which reader takes which input item: input_items.py (messages, reasoning, compaction) and each tool's
`reads` (tools/), gathered by the registry."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Self, TypeVar, cast

from openai_harmony import Author, Message, Role

from ...core.ids import new_id
from ...errors import bad_request
from ...protocol import ItemStatus
from ..shapes.items import MessageOutput
from .thread import ThreadMark

SUMMARY_HEAD = "Summary of the conversation so far (earlier turns were compacted):\n"

Records = list[dict[str, Any]]  # the input items as the API lists them back
# How an input item of one type is read: into the dialog's messages and state, and its record appended
# (none for an item sent again with a whole thread). `index` is its place in the request's input.
InputReader = Callable[["Dialog", int, Any, Records], None]


class ToolState(Protocol):
    """A tool's part of the dialog's state (tools/: the containers', MCP's, tool search's, the browser's):
    what the tool carries from one response of a conversation to the next. Stored with the dialog's own
    state, in keys of its own (`to_json`), and read back from them (`from_json`)."""

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Self: ...

    def to_json(self) -> dict[str, Any]: ...

    def copy(self) -> Self: ...


StateT = TypeVar("StateT", bound=ToolState)
# The dialog's own keys in its stored state; every other key is a tool's.
_OWN_KEYS = ("answered", "session_key", "thread")


@dataclass
class Dialog:
    """The Harmony messages after the system/developer preamble, the open function calls in them, and
    the conversation's tool state (each tool's own part: `tool_state`)."""

    messages: list[Message] = field(default_factory=list)
    # call_id → the call's recipient (`functions.NAME`, `NAMESPACE.NAME`), for calls whose output the client
    # has not sent yet. (Records stored before namespaces hold the bare function name.)
    open_calls: dict[str, str] = field(default_factory=dict)
    # call_id → digest of the output the client gave, for calls answered earlier in the conversation:
    # clients that send the whole thread again with previous_response_id repeat them.
    answered: dict[str, str] = field(default_factory=dict)
    # The item each message belongs to (parallel to `messages`; None where none does yet), and the item
    # the messages appended now belong to: a conversation keeps each item with its messages.
    owners: list[str | None] = field(default_factory=list)
    owner: str | None = None
    # Names the conversation to the engine's router, the same for every response that continues it.
    session_key: str = field(default_factory=lambda: new_id("sess"))
    # The inputs the chain was given, to recognise a thread sent again whole (thread.py).
    thread: ThreadMark = field(default_factory=ThreadMark)
    # The tools' parts of the state, by kind, as read (`tool_state`); and the stored state they are read
    # from, whose keys no tool has read yet are stored again as they were.
    _tool_states: dict[type[Any], Any] = field(default_factory=dict)
    _stored_tool_state: dict[str, Any] = field(default_factory=dict)

    def tool_state(self, kind: type[StateT]) -> StateT:
        """A tool's part of the state, read from the stored state the first time it is asked for."""
        state = self._tool_states.get(kind)
        if state is None:
            state = self._tool_states[kind] = kind.from_json(self._stored_tool_state)
        return cast(StateT, state)

    def copy(self) -> "Dialog":
        """A dialog to go on from, leaving this one as it is (its messages are shared: none is changed in
        place, only appended or replaced)."""
        return replace(
            self,
            messages=list(self.messages),
            open_calls=dict(self.open_calls),
            answered=dict(self.answered),
            owners=list(self.owners),
            thread=ThreadMark(self.thread.count, self.thread.digest),
            _tool_states={kind: state.copy() for kind, state in self._tool_states.items()},
            _stored_tool_state=dict(self._stored_tool_state),
        )

    def compact(self, summary: str) -> None:
        """The dialog as the model reads it after compaction (compaction.py): the user's and developer's
        messages, then the model's summary in place of everything else that came before."""
        self.forget_all_but_user_turns()
        self.append(Message.from_role_and_content(Role.ASSISTANT, SUMMARY_HEAD + summary).with_channel("final"))

    def forget_all_but_user_turns(self) -> None:
        """What a compaction keeps of what came before it: the user's and the developer's messages."""
        kept = [(message, owner) for message, owner in zip(self.messages, self.owners) if message.author.role in (Role.USER, Role.DEVELOPER)]
        self.messages = [message for message, _ in kept]
        self.owners = [owner for _, owner in kept]

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.owners.append(self.owner)

    def claim(self, start: int, item_id: str) -> None:
        """The messages from `start` on belong to this item."""
        self.owners[start:] = [item_id] * (len(self.messages) - start)

    def by_owner(self, start: int) -> dict[str, list[Message]]:
        """The messages from `start` on, grouped by the item each belongs to. A message of no item (a call
        to a tool that does not exist, and the error the model read) goes with the item that follows it,
        the model's next try, or with the last item when none follows."""
        groups: dict[str, list[Message]] = {}
        waiting: list[Message] = []
        last: str | None = None
        for message, owner in zip(self.messages[start:], self.owners[start:]):
            if owner is None:
                waiting.append(message)
                continue
            groups.setdefault(owner, []).extend(waiting)
            groups[owner].append(message)
            waiting, last = [], owner
        if waiting and last is not None:
            groups[last].extend(waiting)
        return groups

    def to_json(self, start: int = 0) -> list[dict[str, Any]]:
        """The messages from `start` on, as openai_harmony's dicts."""
        return [message.to_dict() for message in self.messages[start:]]

    def state(self) -> dict[str, Any]:
        """The state stored with the dialog: its own, and every tool's part."""
        state = dict(self._stored_tool_state)
        for tool_state in self._tool_states.values():
            state.update(tool_state.to_json())
        return state | {"answered": self.answered, "session_key": self.session_key, "thread": self.thread.as_json()}

    @classmethod
    def from_json(cls, data: list[dict[str, Any]], open_calls: dict[str, str], state: dict[str, Any]) -> "Dialog":
        return cls(
            [Message.from_dict(entry) for entry in data],
            dict(open_calls),
            answered=dict(state.get("answered", {})),
            owners=[None] * len(data),
            session_key=state.get("session_key") or new_id("sess"),
            thread=ThreadMark.from_json(state.get("thread")),
            _stored_tool_state={key: value for key, value in state.items() if key not in _OWN_KEYS},
        )


def tool_result(recipient: str, channel: str | None, text: str) -> Message:
    """A tool's output as Harmony wants it: authored by the tool, same channel as the call, to the assistant."""
    message = Message.from_author_and_content(Author.new(Role.TOOL, recipient), text).with_recipient("assistant")
    return message.with_channel(channel or "commentary")


def tool_call_message(recipient: str, arguments: str) -> Message:
    """An assistant's JSON call to a function or an MCP tool, as the model writes one."""
    return (
        Message.from_role_and_content(Role.ASSISTANT, arguments)
        .with_channel("commentary")
        .with_recipient(recipient)
        .with_content_type("<|constrain|>json")
    )


def message_record(item_id: str | None, role: str, text: str) -> dict[str, Any]:
    """A message as the input items list it."""
    part_type = "output_text" if role == "assistant" else "input_text"
    return {
        "id": item_id or MessageOutput.fresh_id(),
        "type": "message",
        "role": role,
        "status": ItemStatus.COMPLETED,
        "content": [{"type": part_type, "text": text}],
    }


def read_call(dialog: Dialog, call_id: str, recipient: str, message: Message, record: dict[str, Any], records: Records) -> None:
    """A call the model made that the client sends back: its message, and the call left open for its
    output. A call already in the history (sent again with the whole thread) is read once."""
    if call_id in dialog.answered or call_id in dialog.open_calls:
        return
    dialog.append(message)
    dialog.open_calls[call_id] = recipient
    records.append(record)


def read_call_output(dialog: Dialog, index: int, call_id: str, output: str, record: dict[str, Any], records: Records) -> None:
    """The client's output of an open call: what the model reads as the tool's answer. The same output
    sent again with the whole thread is read once; any other answer to a call not open is a 400."""
    digest = hashlib.sha256(output.encode()).hexdigest()
    recipient = dialog.open_calls.pop(call_id, None)
    if recipient is None:
        if dialog.answered.get(call_id) == digest:
            return
        already = "was answered with another output" if call_id in dialog.answered else "was not found"
        raise bad_request(
            f"No tool call found for function call output with call_id {call_id}: the call {already}.",
            param=f"input[{index}].call_id",
        )
    dialog.answered[call_id] = digest
    if "." not in recipient:  # a record from before namespaces: a plain function
        recipient = f"functions.{recipient}"
    dialog.append(tool_result(recipient, "commentary", output))
    records.append(record)
