"""What a route reads from a request besides its body: the tenant, the app's services, query lists."""

from __future__ import annotations

from typing import Any

from starlette.requests import HTTPConnection, Request

from ..errors import APIError
from ..shutdown import Drain


def tenant_of(request: Request) -> str:
    """The tenant the middleware found for the request's key."""
    tenant: str = request.state.tenant
    return tenant


def services_of(request: HTTPConnection) -> Any:
    """The app's services (gateway/services.py), for a package's `needs_of` to name the part it uses."""
    return request.app.state.services


def include_query(request: Request) -> list[str]:
    """`include` as a query: the SDK writes `include[]=A&include[]=B`, others `include=A`."""
    params = request.query_params
    return params.getlist("include") + params.getlist("include[]")


def refuse_while_draining(drain: Drain) -> None:
    if drain.draining:
        raise APIError(503, "The gateway is shutting down.", type="server_error", code="server_shutting_down")
