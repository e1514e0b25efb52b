"""HTTP endpoints of the Conversations API: conversations and their items, in OpenAI's shapes.

Items given here go through the same conversion as a response's input, so the model later reads them
exactly as if they had been sent as input; a response with `conversation` adds its own (run.py).
"""

from __future__ import annotations

import time
from typing import Awaitable, TypeVar

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.ids import new_id
from ..core.models import Metadata, StrictModel
from ..core.requests import include_query, tenant_of
from ..errors import APIError, bad_request, not_found
from ..files.inputs import read_input_files
from ..jsontext import JSONResponse
from ..responses.history.conversation_items import duplicate, keep_state, missing, new_items, open_conversation, refuse_known_ids
from ..responses.history.dialog import Dialog
from ..responses.loop.input_items import append_input
from ..responses.shapes.input_models import InputItem
from ..responses.tools.registry import carried_out_by_a_response, check_include
from ..storage.conversation_store import Conversation, DuplicateItem
from ..storage.paging import listing, page_query, unknown_after
from ..web.body import parse_body
from .needs import needs_of

T = TypeVar("T")
MAX_ITEMS_PER_REQUEST = 20  # OpenAI's limit on items added at once


class CreateConversation(StrictModel):
    items: list[InputItem] | None = Field(None, max_length=MAX_ITEMS_PER_REQUEST)
    metadata: Metadata | None = None


class UpdateConversation(StrictModel):
    metadata: Metadata


class CreateItems(StrictModel):
    items: list[InputItem] = Field(min_length=1, max_length=MAX_ITEMS_PER_REQUEST)


async def create_conversation(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, CreateConversation, services.config.server.body_limits())
    conversation = Conversation(new_id("conv"), int(time.time()), body.metadata or {}, tenant_of(request))
    dialog = Dialog()
    await read_input_files(body.items or [], services.files, conversation.tenant, "items")
    records = append_input(dialog, body.items or [])
    _refuse_decisions(dialog)
    refuse_known_ids(records, set(), "items")
    keep_state(conversation, dialog)
    await _stored(services.conversations.create(conversation, new_items(dialog, 0, records)))
    return JSONResponse(conversation.as_dict())


async def retrieve_conversation(request: Request) -> Response:
    return JSONResponse((await _conversation(request)).as_dict())


async def update_conversation(request: Request) -> Response:
    services = needs_of(request)
    conversation = await _conversation(request)
    body = await parse_body(request, UpdateConversation, services.config.server.body_limits())
    if not await services.conversations.set_metadata(conversation, body.metadata):
        raise missing(conversation.id)
    conversation.metadata = body.metadata
    return JSONResponse(conversation.as_dict())


async def delete_conversation(request: Request) -> Response:
    services = needs_of(request)
    conversation_id = request.path_params["conversation_id"]
    if not await services.conversations.delete(conversation_id, tenant_of(request)):
        raise missing(conversation_id)
    return JSONResponse({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


async def list_items(request: Request) -> Response:
    services = needs_of(request)
    conversation = await _conversation(request)
    check_include(include_query(request))
    query = page_query(request)
    page = await services.conversations.page(conversation.id, ascending=query.ascending, after=query.after, limit=query.limit)
    if page is None:
        raise unknown_after(query.after or "")
    return JSONResponse(listing(page.items, page.has_more))


async def create_items(request: Request) -> Response:
    """Add items at the end. They are read like a response's input: a `function_call_output` must answer
    a call the conversation holds, an approval response a pending request."""
    services = needs_of(request)
    check_include(include_query(request))
    body = await parse_body(request, CreateItems, services.config.server.body_limits())
    conversation, dialog, known = await open_conversation(
        services.conversations, request.path_params["conversation_id"], tenant_of(request), "conversation_id",
        services.config.conversations.max_items, len(body.items),
    )  # fmt: skip
    start = len(dialog.messages)
    await read_input_files(body.items, services.files, conversation.tenant, "items")
    records = append_input(dialog, body.items)
    _refuse_decisions(dialog)
    refuse_known_ids(records, known, "items")
    keep_state(conversation, dialog)
    if not await _stored(services.conversations.append(conversation, new_items(dialog, start, records))):
        raise missing(conversation.id)
    return JSONResponse(listing(records, False))


async def retrieve_item(request: Request) -> Response:
    services = needs_of(request)
    conversation = await _conversation(request)
    check_include(include_query(request))
    item = await services.conversations.item(conversation.id, request.path_params["item_id"])
    if item is None:
        raise _missing_item(request)
    return JSONResponse(item)


async def delete_item(request: Request) -> Response:
    """Take an item, and the messages it stands for, out of the conversation; answers the conversation."""
    services = needs_of(request)
    conversation = await _conversation(request)
    if not await services.conversations.delete_item(conversation.id, request.path_params["item_id"]):
        raise _missing_item(request)
    return JSONResponse(conversation.as_dict())


async def _conversation(request: Request) -> Conversation:
    services = needs_of(request)
    conversation_id = request.path_params["conversation_id"]
    conversation = await services.conversations.get(conversation_id, tenant_of(request))
    if conversation is None:
        raise missing(conversation_id, "conversation_id")
    return conversation


async def _stored(write: Awaitable[T]) -> T:
    """A write of new items; an id another request added meanwhile is the client's error."""
    try:
        return await write
    except DuplicateItem as exc:
        raise duplicate(exc.item_id, "items") from None


def _refuse_decisions(dialog: Dialog) -> None:
    """An item only a response carries out (an approval runs its call): here nothing runs it."""
    kind = carried_out_by_a_response(dialog)
    if kind is not None:
        raise bad_request(
            f"An {kind} is answered by running the call: send it as the input of a response with this conversation.",
            param="items",
        )


def _missing_item(request: Request) -> APIError:
    return not_found(f"No item with id '{request.path_params['item_id']}' in the conversation.", param="item_id")


routes = [
    Route("/v1/conversations", create_conversation, methods=["POST"]),
    Route("/v1/conversations/{conversation_id}", retrieve_conversation, methods=["GET"]),
    Route("/v1/conversations/{conversation_id}", update_conversation, methods=["POST"]),
    Route("/v1/conversations/{conversation_id}", delete_conversation, methods=["DELETE"]),
    Route("/v1/conversations/{conversation_id}/items", list_items, methods=["GET"]),
    Route("/v1/conversations/{conversation_id}/items", create_items, methods=["POST"]),
    Route("/v1/conversations/{conversation_id}/items/{item_id}", retrieve_item, methods=["GET"]),
    Route("/v1/conversations/{conversation_id}/items/{item_id}", delete_item, methods=["DELETE"]),
]
