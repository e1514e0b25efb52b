"""The dialog a response starts from: the previous response's or the conversation's, with the request's
input appended. Planning only reads: nothing is created, copied or opened here (tools provision their
own, later, in `Toolset.prepare`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.sealed import Purpose, Unsealable
from ...engine.harmony import PromptState
from ...errors import APIError, bad_request
from ...files.inputs import read_input_files
from ...storage.conversation_store import Conversation
from ...storage.response_store import RUNNING
from ..history.conversation_items import open_conversation, refuse_known_ids
from ..history.dialog import Dialog
from ..history.item_references import resolve_references
from ..shapes.input_models import CompactionItem, ReasoningItem, ReasoningText
from ..shapes.request import ResponsesRequest
from .input_items import append_input
from .needs import ResponsesNeeds


@dataclass
class DialogPlan:
    dialog: Dialog = field(default_factory=Dialog)
    input_items: list[dict[str, Any]] = field(default_factory=list)  # the input as the API lists it back
    conversation: Conversation | None = None  # the conversation the response continues and adds to
    new_messages_from: int = 0  # where this response's messages start in the dialog
    # The stored response this one continues, how many of the dialog's messages are its, and its tokens.
    parent_id: str | None = None
    parent_length: int = 0
    parent_tokens: list[str | None] = field(default_factory=list)
    parent_prompt: PromptState | None = None  # the same, kept in memory (a WebSocket's last response)


@dataclass(frozen=True)
class Remembered:
    """The last response a WebSocket ran, kept in memory so that the next one on the socket continues it
    without the store: with `store: false` too, and without reading its dialog and tokens back."""

    response_id: str
    dialog: Dialog
    prompt: PromptState  # its messages' tokens, and its prompt
    stored: bool


async def plan_dialog(services: ResponsesNeeds, request: ResponsesRequest, tenant: str, remembered: Remembered | None = None) -> DialogPlan:
    plan = DialogPlan()
    if remembered is not None and request.previous_response_id == remembered.response_id:
        plan.dialog, plan.parent_prompt = remembered.dialog.copy(), remembered.prompt
        if remembered.stored:  # what this response stores continues the stored one
            plan.parent_id, plan.parent_length = remembered.response_id, len(plan.dialog.messages)
    elif request.previous_response_id:
        previous = await services.store.get(request.previous_response_id, tenant)
        if previous is None:
            raise APIError(
                404,
                f"Previous response with id '{request.previous_response_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        if previous.status in RUNNING:
            raise bad_request(
                f"Previous response '{request.previous_response_id}' is still running: wait for it to end, or cancel it.",
                param="previous_response_id",
            )
        plan.dialog = Dialog.from_json(previous.dialog, previous.open_calls, previous.state)
        plan.parent_id, plan.parent_length, plan.parent_tokens = request.previous_response_id, len(previous.dialog), previous.tokens
    known: set[str] = set()
    if request.conversation_id is not None:
        adding = 1 if isinstance(request.input, str) else max(len(request.input), 1)
        plan.conversation, plan.dialog, known = await open_conversation(
            services.conversations, request.conversation_id, tenant, "conversation", services.config.conversations.max_items, adding
        )
    await resolve_references(services.store, request, tenant)
    unseal_reasoning(services, request, tenant)
    plan.new_messages_from = len(plan.dialog.messages)
    if not isinstance(request.input, str):
        await read_input_files(request.input, services.files, tenant)
    # A trigger asks for what the response does (run.py), it is not read: what it compacts is before it.
    items = request.input[:-1] if request.compacts else request.input
    plan.input_items = append_input(plan.dialog, items, resent_thread=request.previous_response_id is not None)
    if not isinstance(request.input, str) and any(isinstance(item, CompactionItem) for item in request.input):
        # A compaction item rewrote the past: nothing of the parent's messages or tokens lines up any more.
        # The response is stored whole and rendered anew; its items take their messages by owner.
        plan.parent_id, plan.parent_length, plan.new_messages_from = None, 0, 0
        plan.parent_tokens, plan.parent_prompt = [], None
    if plan.conversation is not None:
        refuse_known_ids(plan.input_items, known, "input")
    return plan


def unseal_reasoning(services: ResponsesNeeds, request: ResponsesRequest, tenant: str) -> None:
    """Reasoning and compaction items sent back with `encrypted_content` carry the text the gateway sealed:
    that text is what the model reads. A blob that does not open as that kind of item for this tenant is a
    400 (another tenant's, another kind's, or changed: the same answer for each)."""
    if isinstance(request.input, str):
        return
    for index, item in enumerate(request.input):
        if isinstance(item, (ReasoningItem, CompactionItem)) and item.encrypted_content is not None:
            try:
                purpose = Purpose.COMPACTION if isinstance(item, CompactionItem) else Purpose.REASONING
                text = services.sealer.open(item.encrypted_content, purpose, tenant)
            except Unsealable:
                raise bad_request(
                    "The encrypted content of this reasoning item could not be verified: it was changed, or sealed by another gateway key.",
                    param=f"input[{index}].encrypted_content",
                    code="invalid_encrypted_content",
                ) from None
            if isinstance(item, CompactionItem):
                item._summary = text
            else:
                item.content = [ReasoningText(type="reasoning_text", text=text)]
