"""HTTP endpoints of webhooks (`openai/resources/webhooks/`): endpoints per tenant, created, listed newest
first, retrieved, updated, deleted; their signing secret shown once, at creation and at each rotation; a
test event sent on demand; and the event types this gateway emits."""

from __future__ import annotations

import time

import anyio
from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.browser.guard import BlockedURL

from ..core.models import StrictModel
from ..core.requests import tenant_of
from ..errors import APIError, bad_request, not_found
from ..jsontext import JSONResponse
from ..storage.file_store import TooMany
from ..storage.paging import page_of, page_query
from ..storage.webhook_store import Endpoint, SigningSecrets
from ..web.body import parse_body
from .events import EMITTED, KNOWN, EventType, random_id, sample_event
from .needs import needs_of
from .sender import NotSent
from .signing import hint, made, opened

KEEP_OLD_SECRET_S = 24 * 3600.0


class CreateEndpoint(StrictModel):
    event_types: list[EventType] = Field(min_length=1, max_length=len(KNOWN))
    name: str = Field(min_length=1, max_length=256)
    url: str = Field(min_length=1, max_length=2048)


class UpdateEndpoint(StrictModel):
    # An empty list pauses the endpoint: it stays, with its secret, and receives nothing until given types again.
    event_types: list[EventType] | None = Field(None, max_length=len(KNOWN))
    name: str | None = Field(None, min_length=1, max_length=256)
    url: str | None = Field(None, min_length=1, max_length=2048)


class RotateSecret(StrictModel):
    keep_old_secret_active_for_24_hours: bool = False


class TestEndpoint(StrictModel):
    event_type: EventType


async def create_endpoint(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, CreateEndpoint, services.config.server.body_limits())
    await _check_url(request, body.url)
    tenant, now = tenant_of(request), int(time.time())
    secret, sealed = made(services.sealer, tenant)
    secrets = SigningSecrets(sealed, hint(secret))
    endpoint = Endpoint(random_id("we"), tenant, body.name, body.url, _distinct(body.event_types), secrets, now, now)
    try:
        await services.webhooks.create(endpoint, services.config.webhooks.max_endpoints_per_tenant)
    except TooMany as exc:
        raise bad_request(f"This gateway keeps at most {exc.limit} webhook endpoints per project.", code="too_many_webhook_endpoints") from None
    return JSONResponse(endpoint.as_dict() | {"signing_secret": secret})


async def list_endpoints(request: Request) -> Response:
    query = page_query(request)
    return JSONResponse(page_of(await needs_of(request).webhooks.page(tenant_of(request), query), query))


async def retrieve_endpoint(request: Request) -> Response:
    return JSONResponse((await _endpoint(request)).as_dict())


async def update_endpoint(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, UpdateEndpoint, services.config.server.body_limits())
    if body.url is not None:
        await _check_url(request, body.url)
    event_types = None if body.event_types is None else _distinct(body.event_types)
    updated = await services.webhooks.update(_endpoint_id(request), tenant_of(request), body.name, body.url, event_types)
    if updated is None:
        raise _missing(request)
    return JSONResponse(updated.as_dict())


async def delete_endpoint(request: Request) -> Response:
    endpoint_id = _endpoint_id(request)
    if not await needs_of(request).webhooks.delete(endpoint_id, tenant_of(request)):
        raise _missing(request)
    return JSONResponse({"id": endpoint_id, "object": "webhook_endpoint.deleted", "deleted": True})


async def rotate_secret(request: Request) -> Response:
    """A new signing secret, shown once; the old one stops signing at once, or signs too for 24 hours."""
    services = needs_of(request)
    body = await parse_body(request, RotateSecret, services.config.server.body_limits(), allow_empty=True)
    tenant = tenant_of(request)
    secret, sealed = made(services.sealer, tenant)

    def rotated(before: SigningSecrets) -> SigningSecrets:
        if body.keep_old_secret_active_for_24_hours:
            return SigningSecrets(sealed, hint(secret), before.current, time.time() + KEEP_OLD_SECRET_S)
        return SigningSecrets(sealed, hint(secret))

    endpoint = await services.webhooks.rotate(_endpoint_id(request), tenant, rotated)
    if endpoint is None:
        raise _missing(request)
    return JSONResponse(endpoint.as_dict() | {"signing_secret": secret})


async def test_endpoint(request: Request) -> Response:
    """Send a sample event of the type asked for, signed as every delivery is, once, now; the receiver's answer."""
    services = needs_of(request)
    body = await parse_body(request, TestEndpoint, services.config.server.body_limits())
    endpoint = await _endpoint(request)
    secrets = opened(services.sealer, endpoint.secrets, endpoint.tenant, time.time())
    sender = services.webhook_sender
    try:
        with anyio.fail_after(2 * sender.timeout_s):  # its turn, then the attempt (bounded by timeout_s)
            async with sender.tests.slot(endpoint.tenant):
                status = await sender.send(endpoint.url, random_id("wh"), sample_event(body.event_type), secrets)
    except NotSent as exc:
        raise bad_request(f"The test event could not be delivered: {exc}.", param="url", code="webhook_delivery_failed") from None
    except TimeoutError:
        raise bad_request(
            "The test event could not be sent in time: this project's earlier tests are still waiting for their receivers.",
            param="url",
            code="webhook_delivery_failed",
        ) from None
    return JSONResponse(
        {"object": "webhook_endpoint.test", "webhook_endpoint_id": endpoint.id, "event_type": body.event_type, "status_code": status, "success": True}
    )


async def list_event_types(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": EMITTED})


async def _check_url(request: Request, url: str) -> None:
    try:
        await needs_of(request).webhook_sender.destination(url)
    except BlockedURL as exc:
        raise bad_request(f"The webhook URL is not allowed: {exc}.", param="url") from None


async def _endpoint(request: Request) -> Endpoint:
    endpoint = await needs_of(request).webhooks.get(_endpoint_id(request), tenant_of(request))
    if endpoint is None:
        raise _missing(request)
    return endpoint


def _endpoint_id(request: Request) -> str:
    return str(request.path_params["webhook_endpoint_id"])


def _missing(request: Request) -> APIError:
    return not_found(f"No webhook endpoint with id '{_endpoint_id(request)[:100]}'.", param="webhook_endpoint_id")


def _distinct(event_types: list[str]) -> list[str]:
    return list(dict.fromkeys(event_types))


routes = [
    Route("/v1/webhook_endpoints", create_endpoint, methods=["POST"]),
    Route("/v1/webhook_endpoints", list_endpoints, methods=["GET"]),
    Route("/v1/webhook_endpoints/{webhook_endpoint_id}", retrieve_endpoint, methods=["GET"]),
    Route("/v1/webhook_endpoints/{webhook_endpoint_id}", update_endpoint, methods=["POST"]),
    Route("/v1/webhook_endpoints/{webhook_endpoint_id}", delete_endpoint, methods=["DELETE"]),
    Route("/v1/webhook_endpoints/{webhook_endpoint_id}/rotate_secret", rotate_secret, methods=["POST"]),
    Route("/v1/webhook_endpoints/{webhook_endpoint_id}/test", test_endpoint, methods=["POST"]),
    Route("/v1/webhook_event_types", list_event_types, methods=["GET"]),
]
