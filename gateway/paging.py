"""Cursor-paged lists as OpenAI's API pages them: `limit` (1–100), `order` (`asc`/`desc`), `after` (an id),
answered as `{"object": "list", "data", "first_id", "last_id", "has_more"}`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from .errors import APIError, bad_request
from runtime.numbers import decimal


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


def unknown_after(after: str) -> APIError:
    return bad_request(f"No item with id '{after}' in this list.", param="after")
