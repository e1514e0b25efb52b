"""`item_reference` input items: an item of one of the tenant's stored responses (its output, or its input as
it came), named by id, read as if the client had sent the item itself. Another tenant's item, or one whose
response was deleted or expired, is not found."""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from ...errors import bad_request
from ...storage.response_store import ResponseStore
from ..shapes.input_models import InputItem, ItemReference
from ..shapes.request import ResponsesRequest

_ITEMS = TypeAdapter(list[InputItem])  # one item in a list: the union validated as the request validates it


async def resolve_references(store: ResponseStore, request: ResponsesRequest, tenant: str) -> None:
    """Put each referenced item in the request's input in place of its reference; a 400 naming the one not found."""
    if isinstance(request.input, str):
        return
    for index, item in enumerate(request.input):
        if not isinstance(item, ItemReference):
            continue
        stored = await store.item(item.id, tenant)
        if stored is None:
            raise bad_request(f"Item with id '{item.id}' not found.", param=f"input[{index}].id", code="item_not_found")
        try:
            request.input[index] = _ITEMS.validate_python([stored], strict=False)[0]
        except ValidationError:  # stored by an older gateway in a shape no longer read as input
            raise bad_request(f"Item with id '{item.id}' cannot be read as input.", param=f"input[{index}].id") from None
