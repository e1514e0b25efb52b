"""Input items → Harmony messages, and the input items as the API lists them back."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from openai_harmony import Author, Message, Role

from tools.urls import shown

from ..core.ids import new_id
from ..errors import bad_request
from ..protocol import ItemStatus
from .request import (
    CompactionItem,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputItem,
    McpApprovalRequestItem,
    McpApprovalResponseItem,
    McpCallItem,
    McpListToolsItem,
    McpTool,
    MessageItem,
    ReasoningItem,
    WebSearchCallItem,
)
from .shell_models import (
    APPLY_PATCH_RECIPIENT,
    LOCAL_SHELL_RECIPIENT,
    SHELL_RECIPIENT,
    ApplyPatchCallItem,
    ApplyPatchCallOutputItem,
    LocalShellCallItem,
    LocalShellCallOutputItem,
    ShellCallItem,
    ShellCallOutputItem,
)
from .thread import ThreadMark, input_key, resent_prefix
from .tool_declarations import LoadedTool, checked_definitions, loaded_record, loaded_text
from .tool_search_models import TOOL_SEARCH_RECIPIENT, ToolSearchCallItem, ToolSearchOutputItem, loaded_recipients

SUMMARY_HEAD = "Summary of the conversation so far (earlier turns were compacted):\n"
_ROLES = {"user": Role.USER, "system": Role.DEVELOPER, "developer": Role.DEVELOPER}


@dataclass
class PendingApproval:
    """An MCP call the model made that waits for the user's `mcp_approval_response`."""

    server_label: str
    name: str
    arguments: str
    recipient: str
    channel: str


@dataclass
class Decision:
    """The user's answer to a pending approval, to be carried out before the model goes on."""

    approval_request_id: str
    pending: PendingApproval
    approve: bool
    reason: str | None


@dataclass
class UnwrittenLoad:
    """A search's answer the model is to read, whose MCP servers' declarations come from the servers."""

    message: int  # its place in `Dialog.messages`
    tools: list[LoadedTool]


@dataclass
class Dialog:
    """The Harmony messages after the system/developer preamble, the open function calls in them, and
    the conversation's tool state."""

    messages: list[Message] = field(default_factory=list)
    # call_id → the call's recipient (`functions.NAME`, `NAMESPACE.NAME`), for calls whose output the client
    # has not sent yet. (Records stored before namespaces hold the bare function name.)
    open_calls: dict[str, str] = field(default_factory=dict)
    # The sandbox session the conversation's code has run in.
    container_id: str | None = None
    # MCP servers whose tools were listed to the client in this conversation (once each).
    mcp_listed: list[str] = field(default_factory=list)
    pending_approvals: dict[str, PendingApproval] = field(default_factory=dict)
    # Approval responses of the current request (not stored: carried out by this response).
    decisions: list[Decision] = field(default_factory=list)
    # Answers of searches that loaded MCP servers' tools, sent in the request's input (not stored: written
    # once the request's servers are connected, mcp.py).
    unwritten_loads: list[UnwrittenLoad] = field(default_factory=list)
    # call_id → digest of the output the client gave, for calls answered earlier in the conversation:
    # clients that send the whole thread again with previous_response_id repeat them.
    answered: dict[str, str] = field(default_factory=dict)
    # The item each message belongs to (parallel to `messages`; None where none does yet), and the item
    # the messages appended now belong to: a conversation keeps each item with its messages.
    owners: list[str | None] = field(default_factory=list)
    owner: str | None = None
    # Names the conversation to the engine's router, the same for every response that continues it.
    session_key: str = field(default_factory=lambda: new_id("sess"))
    # The browser's pages by cursor, without their text (tools/browser/pages.py `Page.summary`): the model
    # opens their links and cites them in later responses.
    browser_pages: list[dict[str, Any] | None] = field(default_factory=list)
    # The inputs the chain was given, to recognise a thread sent again whole (thread.py).
    thread: ThreadMark = field(default_factory=ThreadMark)
    # The tool definitions tool search loaded (tool_search.py): callable for the rest of the conversation.
    loaded_tools: list[dict[str, Any]] = field(default_factory=list)
    loaded: set[str] = field(default_factory=set)  # the recipients they make callable

    def copy(self) -> "Dialog":
        """A dialog to go on from, leaving this one as it is (its messages are shared: none is changed in
        place, only appended or replaced)."""
        return replace(
            self,
            messages=list(self.messages),
            open_calls=dict(self.open_calls),
            mcp_listed=list(self.mcp_listed),
            pending_approvals=dict(self.pending_approvals),
            decisions=list(self.decisions),
            unwritten_loads=list(self.unwritten_loads),
            answered=dict(self.answered),
            owners=list(self.owners),
            browser_pages=list(self.browser_pages),
            thread=ThreadMark(self.thread.count, self.thread.digest),
            loaded_tools=list(self.loaded_tools),
            loaded=set(self.loaded),
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

    def load(self, tools: list[dict[str, Any]]) -> None:
        self.loaded_tools += tools
        self.loaded |= loaded_recipients(tools)

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
        return {
            "container_id": self.container_id,
            "mcp_listed": self.mcp_listed,
            "pending_approvals": {key: asdict(value) for key, value in self.pending_approvals.items()},
            "answered": self.answered,
            "session_key": self.session_key,
            "browser_pages": self.browser_pages,
            "thread": self.thread.as_json(),
            "loaded_tools": self.loaded_tools,
        }

    @classmethod
    def from_json(cls, data: list[dict[str, Any]], open_calls: dict[str, str], state: dict[str, Any]) -> "Dialog":
        return cls(
            [Message.from_dict(entry) for entry in data],
            dict(open_calls),
            state.get("container_id"),
            list(state.get("mcp_listed", [])),
            {key: PendingApproval(**value) for key, value in state.get("pending_approvals", {}).items()},
            answered=dict(state.get("answered", {})),
            owners=[None] * len(data),
            session_key=state.get("session_key") or new_id("sess"),
            browser_pages=list(state.get("browser_pages") or []),
            thread=ThreadMark.from_json(state.get("thread")),
            loaded_tools=list(state.get("loaded_tools") or []),
            loaded=loaded_recipients(state.get("loaded_tools") or []),
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


def append_input(dialog: Dialog, items: str | list[InputItem], resent_thread: bool = False) -> list[dict[str, Any]]:
    """Add a request's input to the dialog; return the input items as `input_items` lists them. With
    `resent_thread` (a continuation of `previous_response_id`), the chain's inputs sent again are read once."""
    if isinstance(items, str):
        dialog.append(Message.from_role_and_content(Role.USER, items))
        record = _message_record(None, "user", items)
        dialog.claim(len(dialog.messages) - 1, record["id"])
        dialog.thread.add(input_key(items))  # type: ignore[arg-type]  # a string always has a key
        return [record]

    records: list[dict[str, Any]] = []
    skipped = resent_prefix(items, dialog.thread) if resent_thread else 0
    for index, item in enumerate(items):
        if index < skipped:
            continue
        start, recorded = len(dialog.messages), len(records)
        _append_item(dialog, index, item, records)
        if len(records) > recorded:
            dialog.claim(start, records[-1]["id"])
            key = input_key(item)
            if key is not None:  # read as new: one of the chain's inputs from now on
                dialog.thread.add(key)
    return records


# The calls of the client's own tools sent back: the recipient the model wrote, and their items' id prefix.
_CLIENT_ACTIONS: dict[type, tuple[str, str]] = {
    ShellCallItem: (SHELL_RECIPIENT, "sh"),
    LocalShellCallItem: (LOCAL_SHELL_RECIPIENT, "lsh"),
    ApplyPatchCallItem: (APPLY_PATCH_RECIPIENT, "apc"),
}


def _append_item(dialog: Dialog, index: int, item: InputItem, records: list[dict[str, Any]]) -> None:
    """One input item's messages into the dialog, and its record (none for an item sent again)."""
    if isinstance(item, MessageItem):
        text = item.text()
        if item.role == "assistant":
            channel = "commentary" if item.phase == "commentary" else "final"
            dialog.append(Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel))
        else:
            dialog.append(Message.from_role_and_content(_ROLES[item.role], text))
        records.append(_message_record(item.id, item.role, text))
    elif isinstance(item, ReasoningItem):
        dialog.append(Message.from_role_and_content(Role.ASSISTANT, item.text()).with_channel("analysis"))
        records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id("rs")})
    elif isinstance(item, FunctionCallItem):
        if item.call_id in dialog.answered or item.call_id in dialog.open_calls:
            return  # a call already in the history, sent again with the whole thread
        dialog.append(tool_call_message(item.recipient, item.arguments))
        dialog.open_calls[item.call_id] = item.recipient
        records.append(item.model_dump() | {"id": item.id or new_id("fc"), "status": ItemStatus.COMPLETED})
    elif isinstance(item, (ShellCallItem, LocalShellCallItem, ApplyPatchCallItem)):
        if item.call_id in dialog.answered or item.call_id in dialog.open_calls:
            return  # sent again with the whole thread
        to, prefix = _CLIENT_ACTIONS[type(item)]
        dialog.append(tool_call_message(to, item.arguments()))
        dialog.open_calls[item.call_id] = to
        records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id(prefix), "status": ItemStatus.COMPLETED})
    elif isinstance(item, CustomToolCallItem):
        if item.call_id in dialog.answered or item.call_id in dialog.open_calls:
            return  # sent again with the whole thread
        message = Message.from_role_and_content(Role.ASSISTANT, item.input)
        dialog.append(message.with_channel("commentary").with_recipient(item.recipient))
        dialog.open_calls[item.call_id] = item.recipient
        records.append(item.model_dump() | {"id": item.id or new_id("ctc"), "status": ItemStatus.COMPLETED})
    elif isinstance(
        item, (FunctionCallOutputItem, CustomToolCallOutputItem, ShellCallOutputItem, LocalShellCallOutputItem, ApplyPatchCallOutputItem)
    ):
        output = item.text()
        digest = hashlib.sha256(output.encode()).hexdigest()
        call_id = item.answers if isinstance(item, LocalShellCallOutputItem) else item.call_id
        recipient = dialog.open_calls.pop(call_id, None)
        if recipient is None:
            if dialog.answered.get(call_id) == digest:
                return  # this very output is in the history already: sent again with the whole thread
            already = "was answered with another output" if call_id in dialog.answered else "was not found"
            raise bad_request(
                f"No tool call found for function call output with call_id {call_id}: the call {already}.",
                param=f"input[{index}].call_id",
            )
        dialog.answered[call_id] = digest
        if "." not in recipient:  # a record from before namespaces: a plain function
            recipient = f"functions.{recipient}"
        dialog.append(tool_result(recipient, "commentary", output))
        if isinstance(item, (ShellCallOutputItem, LocalShellCallOutputItem, ApplyPatchCallOutputItem)):
            record = item.model_dump(exclude_none=True) | {"status": item.status or ItemStatus.COMPLETED}
        else:
            record = item.model_dump() | {"status": ItemStatus.COMPLETED}
        records.append(record | {"id": item.id or new_id("fco")})
    elif isinstance(item, ToolSearchCallItem):
        if item.call_id is not None and (item.call_id in dialog.answered or item.call_id in dialog.open_calls):
            return  # sent again with the whole thread
        dialog.append(tool_call_message(TOOL_SEARCH_RECIPIENT, item.arguments_text()))
        if item.execution == "client" and item.call_id is not None:
            dialog.open_calls[item.call_id] = TOOL_SEARCH_RECIPIENT
        records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id("tsc"), "status": item.status or ItemStatus.COMPLETED})
    elif isinstance(item, ToolSearchOutputItem):
        _append_search_output(dialog, index, item, records)
    elif isinstance(item, McpApprovalResponseItem):
        pending = dialog.pending_approvals.pop(item.approval_request_id, None)
        if pending is None:
            raise bad_request(
                f"No pending MCP approval request with id {item.approval_request_id}.",
                param=f"input[{index}].approval_request_id",
            )
        dialog.decisions.append(Decision(item.approval_request_id, pending, item.approve, item.reason))
        records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id("mcpa")})
    elif isinstance(item, McpApprovalRequestItem):  # history sent back by the client
        recipient = f"{item.server_label}.{item.name}"
        dialog.append(tool_call_message(recipient, item.arguments))
        dialog.pending_approvals[item.id] = PendingApproval(item.server_label, item.name, item.arguments, recipient, "commentary")
        records.append(item.model_dump())
    elif isinstance(item, McpCallItem):
        recipient = f"{item.server_label}.{item.name}"
        dialog.append(tool_call_message(recipient, item.arguments))
        result = item.output if item.error is None else f"Error: {item.error}"
        dialog.append(tool_result(recipient, "commentary", result or ""))
        records.append(item.model_dump() | {"id": item.id or new_id("mcp")})
    elif isinstance(item, WebSearchCallItem):
        # What the browser showed is not kept with the item, and Harmony leaves a past turn's calls out of
        # the prompt anyway (they are analysis): the item is listed, the model reads the answer that cited it.
        records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id("ws")})
    elif isinstance(item, CompactionItem):  # what it summarised is left out of what the model reads
        dialog.compact(item._summary or "")
        records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id("cmp")})
    elif isinstance(item, McpListToolsItem):
        if item.error is None and item.server_label not in dialog.mcp_listed:
            dialog.mcp_listed.append(item.server_label)
        records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id("mcpl")})


def _append_search_output(dialog: Dialog, index: int, item: ToolSearchOutputItem, records: list[dict[str, Any]]) -> None:
    """The tools a search loaded: declared to the model where the answer is, callable from then on."""
    tools = checked_definitions(item.tools, f"input[{index}].tools")
    if item.execution == "client":  # the answer to a client's search: matched to its call, like a function's
        if item.call_id is None:
            raise bad_request("A client tool_search_output needs the call_id of its tool_search_call.", param=f"input[{index}].call_id")
        digest = hashlib.sha256(json.dumps(item.tools, sort_keys=True).encode()).hexdigest()
        if dialog.open_calls.pop(item.call_id, None) is None:
            if dialog.answered.get(item.call_id) == digest:
                return  # sent again with the whole thread
            raise bad_request(f"No tool search call found for tool_search_output with call_id {item.call_id}.", param=f"input[{index}].call_id")
        dialog.answered[item.call_id] = digest
    if any(isinstance(tool, McpTool) for tool in tools):
        dialog.unwritten_loads.append(UnwrittenLoad(len(dialog.messages), tools))
    dialog.append(tool_result(TOOL_SEARCH_RECIPIENT, "commentary", loaded_text(tools)))
    dialog.load([loaded_record(tool) for tool in tools])
    record = item.model_dump(exclude_none=True) | {"id": item.id or new_id("tso"), "status": item.status or ItemStatus.COMPLETED}
    record["tools"] = [_without_credentials(tool) for tool in item.tools]
    records.append(record)


def _without_credentials(tool: dict[str, Any]) -> dict[str, Any]:
    """A loaded tool as the input items list it: an MCP server's headers, and what its URL may carry of
    credentials, are never stored."""
    if tool.get("type") != "mcp":
        return tool
    kept = {key: value for key, value in tool.items() if key not in ("headers", "authorization")}
    if isinstance(kept.get("server_url"), str):
        kept["server_url"] = shown(kept["server_url"])
    return kept


def _message_record(item_id: str | None, role: str, text: str) -> dict[str, Any]:
    part_type = "output_text" if role == "assistant" else "input_text"
    return {
        "id": item_id or new_id("msg"),
        "type": "message",
        "role": role,
        "status": ItemStatus.COMPLETED,
        "content": [{"type": part_type, "text": text}],
    }
