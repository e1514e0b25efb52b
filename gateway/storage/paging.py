"""Cursor-paged lists as OpenAI's API pages them: `limit` (1–100), `order` (`asc`/`desc`), `after` (an id),
answered as `{"object": "list", "data", "first_id", "last_id", "has_more"}`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, TypeVar

from starlette.requests import Request

from runtime.numbers import decimal

from ..errors import APIError, bad_request
from . import Database

T = TypeVar("T")


@dataclass(frozen=True)
class PageQuery:
    ascending: bool
    limit: int
    after: str | None


def page_query(request: Request, default: int = 20, maximum: int = 100) -> PageQuery:
    params = request.query_params
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise bad_request("order must be 'asc' or 'desc'.", param="order")
    limit = decimal(params.get("limit", str(default)))
    if limit is None:
        raise bad_request("limit must be an integer.", param="limit", code="invalid_type")
    if not 1 <= limit <= maximum:
        raise bad_request(f"limit must be between 1 and {maximum}.", param="limit")
    return PageQuery(order == "asc", limit, params.get("after"))


def listing(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }


class Listed(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


def page_of(found: tuple[Sequence[Listed], bool] | None, query: PageQuery) -> dict[str, Any]:
    """The list object of a page a store found; a 400 when the page's `after` named nothing in the list."""
    return page_shown(found, query, lambda item: item.as_dict())


def page_shown(found: tuple[Sequence[T], bool] | None, query: PageQuery, shown: Callable[[T], dict[str, Any]]) -> dict[str, Any]:
    """`page_of` for records an API shows through `shown`."""
    if found is None:
        raise unknown_after(query.after or "")
    items, has_more = found
    return listing([shown(item) for item in items], has_more)


def unknown_after(after: str) -> APIError:
    return bad_request(f"No item with id '{after}' in this list.", param="after")


async def fetch_page(
    db: Database, table: str, columns: str, where: str, params: list[Any], page: PageQuery, key: str = "created_at"
) -> list[Any] | None:
    """One page of `table`'s rows more than asked (to tell has_more), ordered by `key` then id; None if
    `after` names no row of the list."""
    order = "ASC" if page.ascending else "DESC"
    if page.after is not None:
        rows = await db.fetch(f"SELECT {key}, id FROM {table} WHERE id = ? AND {where}", page.after, *params)
        if not rows:
            return None
        where += f" AND ({key}, id) {'>' if page.ascending else '<'} (?, ?)"
        params = params + [rows[0][0], rows[0][1]]
    return await db.fetch(f"SELECT {columns} FROM {table} WHERE {where} ORDER BY {key} {order}, id {order} LIMIT ?", *params, page.limit + 1)
