"""A request's input items into the dialog, and the input items as the API lists them back.

Messages, reasoning and compaction are read here; every other item is a tool's own (the calls the model
made and their outputs, sent back by the client), read by the tool that produces it: its `reads`, which
the registry gathers into one table (tools/registry.py). An item type nothing reads is refused before it
gets here: the request's models know it, or the request is a 400.
"""

from __future__ import annotations

from typing import Any

from openai_harmony import Message, Role

from ...errors import bad_request
from ..history.dialog import Dialog, InputReader, Records, message_record
from ..history.settings import read_configuration_update
from ..history.thread import input_key, resent_prefix
from ..shapes.input_models import (
    AdditionalToolsItem,
    CompactionItem,
    CompactionTriggerItem,
    ConfigurationUpdateItem,
    InputItem,
    ItemReference,
    MessageItem,
    ReasoningItem,
)
from ..shapes.items import ReasoningOutput
from ..tools.additional import read_additional_tools
from ..tools.registry import INPUT_READERS
from .compaction import CompactionOutput

_ROLES = {"user": Role.USER, "system": Role.DEVELOPER, "developer": Role.DEVELOPER}


def append_input(dialog: Dialog, items: str | list[InputItem], resent_thread: bool = False) -> Records:
    """Add a request's input to the dialog; return the input items as `input_items` lists them. With
    `resent_thread` (a continuation of `previous_response_id`), the chain's inputs sent again are read once."""
    if isinstance(items, str):
        dialog.append(Message.from_role_and_content(Role.USER, items))
        record = message_record(None, "user", items)
        dialog.claim(len(dialog.messages) - 1, record["id"])
        dialog.thread.add(input_key(items))  # type: ignore[arg-type]  # a string always has a key
        return [record]

    records: Records = []
    skipped = resent_prefix(items, dialog.thread) if resent_thread else 0
    for index, item in enumerate(items):
        if index < skipped:
            continue
        start, recorded = len(dialog.messages), len(records)
        READERS[type(item)](dialog, index, item, records)
        if len(records) > recorded:
            dialog.claim(start, records[-1]["id"])
            key = input_key(item)
            if key is not None:  # read as new: one of the chain's inputs from now on
                dialog.thread.add(key)
    return records


def _read_message(dialog: Dialog, index: int, item: MessageItem, records: Records) -> None:
    text = item.text()
    if item.role == "assistant":
        channel = "commentary" if item.phase == "commentary" else "final"
        dialog.append(Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel))
    else:
        dialog.append(Message.from_role_and_content(_ROLES[item.role], text))
    records.append(message_record(item.id, item.role, text))


def _read_reasoning(dialog: Dialog, index: int, item: ReasoningItem, records: Records) -> None:
    dialog.append(Message.from_role_and_content(Role.ASSISTANT, item.text()).with_channel("analysis"))
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or ReasoningOutput.fresh_id()})


def _read_compaction(dialog: Dialog, index: int, item: CompactionItem, records: Records) -> None:
    dialog.compact(item._summary or "")  # what it summarised is left out of what the model reads
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or CompactionOutput.fresh_id()})


def _unresolved(dialog: Dialog, index: int, item: ItemReference, records: Records) -> None:
    """A reference a response's input resolves first (item_references.py); elsewhere (a conversation's
    items) it is refused by name."""
    raise bad_request("An item_reference is read only in a response's input: send the item itself.", param=f"items[{index}]")


def _trigger_elsewhere(dialog: Dialog, index: int, item: CompactionTriggerItem, records: Records) -> None:
    """A response's last input item is taken off before its input is read (dialog_plan.py); a trigger
    anywhere else (a conversation's items) is refused by name."""
    raise bad_request("A compaction_trigger is read only as a response's last input item.", param=f"items[{index}]")


_OWN: dict[type[Any], InputReader] = {
    MessageItem: _read_message,
    ReasoningItem: _read_reasoning,
    CompactionItem: _read_compaction,
    ItemReference: _unresolved,
    CompactionTriggerItem: _trigger_elsewhere,
    AdditionalToolsItem: read_additional_tools,
    ConfigurationUpdateItem: read_configuration_update,
}
READERS: dict[type[Any], InputReader] = _OWN | INPUT_READERS
