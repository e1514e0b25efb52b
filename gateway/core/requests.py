"""What a route reads from a request besides its body: the tenant, the app's services, query lists."""

from __future__ import annotations

from typing import Generic, TypeVar

from starlette.requests import HTTPConnection, Request

from ..errors import APIError
from ..shutdown import Drain


def tenant_of(request: Request) -> str:
    """The tenant the middleware found for the request's key."""
    tenant: str = request.state.tenant
    return tenant


NeedsT = TypeVar("NeedsT")


class NeedsOf(Generic[NeedsT]):
    """Reads the app's services (gateway/services.py) as the part of them a package uses, its `needs`
    Protocol: `needs_of = NeedsOf[FilesNeeds]()`. That `Services` satisfies every such Protocol is checked
    by the type checker where the services are composed (`serve_every_package`)."""

    def __call__(self, request: HTTPConnection) -> NeedsT:
        needs: NeedsT = request.app.state.services
        return needs


def include_query(request: Request) -> list[str]:
    """`include` as a query: the SDK writes `include[]=A&include[]=B`, others `include=A`."""
    params = request.query_params
    return params.getlist("include") + params.getlist("include[]")


def metadata_query(request: Request) -> dict[str, str]:
    """`metadata[key]=value` pairs of a list's query: the metadata a listed record must hold."""
    params = request.query_params
    return {key[len("metadata[") : -1]: value for key, value in params.items() if key.startswith("metadata[") and key.endswith("]")}


def refuse_while_draining(drain: Drain) -> None:
    if drain.draining:
        raise APIError(503, "The gateway is shutting down.", type="server_error", code="server_shutting_down")
