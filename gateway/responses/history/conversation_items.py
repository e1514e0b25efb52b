"""A conversation as the dialog a response continues, and what the response adds back to it."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from openai_harmony import Message

from ...errors import APIError, bad_request, not_found
from ...storage.conversation_store import Conversation, ConversationItem, ConversationStore
from .dialog import Dialog


async def open_conversation(
    store: ConversationStore, conversation_id: str, tenant: str, param: str, max_items: int, adding: int
) -> tuple[Conversation, Dialog, set[str]]:
    """The conversation, its items' messages as a dialog (each message owned by its item; a compaction item
    in place of what it summarised), and its item ids.
    A conversation that would pass `max_items` with `adding` more is a 400: reading it costs time in
    proportion to its length, and the model's context holds far fewer items anyway."""
    conversation = await store.get(conversation_id, tenant)
    if conversation is None:
        raise missing(conversation_id, param)
    count = await store.count_items(conversation_id)
    if count + adding > max_items:
        raise bad_request(
            f"Conversation '{conversation_id}' holds {count} items, and this gateway keeps {max_items} at most in one "
            "conversation. Start a new conversation, or delete items from this one.",
            param=param, code="conversation_too_long",
        )  # fmt: skip
    items = await store.all_items(conversation_id)
    dialog = Dialog.from_json([], conversation.open_calls, conversation.state)
    for entry in items:
        if entry.item.get("type") == "compaction":  # it holds the summary of what came before it
            dialog.forget_all_but_user_turns()
        for message in entry.messages:
            dialog.messages.append(Message.from_dict(message))
            dialog.owners.append(entry.id)
    return conversation, dialog, {entry.id for entry in items}


def refuse_known_ids(records: list[dict[str, Any]], known: set[str], param: str) -> None:
    """An item id may appear in a conversation once."""
    for record in records:
        if record["id"] in known:
            raise duplicate(record["id"], param)
        known.add(record["id"])


def new_items(dialog: Dialog, start: int, items: Sequence[Mapping[str, Any]]) -> list[ConversationItem]:
    """The items added since `start`, in order, each with the messages the dialog gained for it."""
    messages = dialog.by_owner(start)
    return [ConversationItem(item["id"], item, [message.to_dict() for message in messages.get(item["id"], [])]) for item in items]


def keep_state(conversation: Conversation, dialog: Dialog) -> None:
    """The tool state the next response of the conversation starts from."""
    conversation.open_calls = dict(dialog.open_calls)
    conversation.state = dialog.state()


def duplicate(item_id: str, param: str) -> APIError:
    return bad_request(f"Duplicate item found with id '{item_id}': the conversation holds it already.", param=param, code="duplicate_item")


def missing(conversation_id: str, param: str | None = None) -> APIError:
    return not_found(f"Conversation with id '{conversation_id}' not found.", param=param)
