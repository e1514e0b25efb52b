"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API, a door to the same
runs as the Responses and Chat doors (translate.py in, content.py and stream.py out). Errors anywhere
under these paths are in Anthropic's shape (errors.py), with its statuses."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runtime.cpu import run_cpu
from runtime.numbers import decimal

from ..core.requests import refuse_while_draining, tenant_of
from ..engine.completion import ModelInfo
from ..engine.routing import Engines
from ..errors import APIError
from ..jsontext import JSONResponse
from ..responses.loop.needs import needs_of
from ..responses.loop.prompt_builder import ChatOptions
from ..responses.routes import event_stream, wait_for_run
from ..responses.run_service import RunService
from ..responses.shapes.request import ResponsesRequest
from ..web.body import INLINE_BYTES, parse_body
from .content import whole_message
from .context_edits import applied, tool_clearing
from .request import CountTokensRequest, MessagesRequest
from .stream import MessageFrames
from .translate import to_responses

SHOWN_THINKING = frozenset({None, "summarized", "updates", "full"})  # "omitted" sends the signature alone


def served_model(engines: Engines, name: str) -> str | None:
    """The model a request's name routes to; a `claude-*` name no alias maps (Claude Code's defaults) is
    the first configured model, as a request naming none."""
    try:
        engines.route(name)
    except APIError as exc:
        if exc.status == 404 and name.startswith("claude-"):
            return None
        raise
    return name


async def create_message(request: Request) -> Response:
    services = needs_of(request)
    refuse_while_draining(services.drain)
    body = await parse_body(request, MessagesRequest, services.config.server.body_limits())
    refuse_while_draining(services.drain)  # again: the body may have finished arriving after SIGTERM
    tenant = tenant_of(request)
    service, session = RunService(services), request.headers.get("x-claude-code-session-id")
    planned = await plan(service, body, served_model(services.engines, body.model), tenant, session, is_large(request))
    run = await service.start(planned.request, tenant, planned.options)
    shown = getattr(body.thinking, "display", None) in SHOWN_THINKING
    if body.stream:
        return event_stream(services, run, MessageFrames(run, body.model, body.max_tokens, shown, planned.edits).frames())
    await wait_for_run(request, run)
    await run.result()
    return JSONResponse(whole_message(run, body.model, body.max_tokens, shown, planned.edits))


async def count_tokens(request: Request) -> Response:
    """The prompt's exact length: the gateway renders it itself, as the first engine call would get it."""
    services = needs_of(request)
    body = await parse_body(request, CountTokensRequest, services.config.server.body_limits())
    service, tenant = RunService(services), tenant_of(request)
    planned = await plan(service, body, served_model(services.engines, body.model), tenant, None, is_large(request))
    return JSONResponse({"input_tokens": await service.input_tokens(planned.request, tenant)})


def is_large(request: Request) -> bool:
    return (decimal(request.headers.get("content-length", "")) or 0) > INLINE_BYTES


@dataclass
class Planned:
    request: ResponsesRequest
    options: ChatOptions
    edits: dict[str, Any] | None = None  # `context_management` as the answer tells it, where an edit was applied


async def translated(body: MessagesRequest, model: str | None, session: str | None, large: bool) -> tuple[ResponsesRequest, ChatOptions]:
    """The translation, in a worker thread for a large request (as its body was parsed: web/body.py)."""
    return await run_cpu(to_responses, body, model, session) if large else to_responses(body, model, session)


async def plan(service: RunService, body: MessagesRequest, model: str | None, tenant: str, session: str | None, large: bool) -> Planned:
    """The Responses request the Messages request runs as, its tool uses cleared first where its
    `clear_tool_uses` edit is due (context_edits.py: counted on the prompt as rendered)."""
    planned = Planned(*await translated(body, model, session, large))
    clearing = tool_clearing(body)
    if clearing is None:
        return planned
    before = await service.input_tokens(planned.request, tenant)
    if not clearing.due(before, body):
        return planned
    edited, cleared = clearing.apply(body)
    if not cleared:
        return planned
    shorter = Planned(*await translated(edited, model, session, large))
    saved = before - await service.input_tokens(shorter.request, tenant)
    if saved < clearing.clear_at_least:
        return planned
    shorter.edits = applied(cleared, saved)
    return shorter


def anthropic_models(listed: list[ModelInfo]) -> dict[str, Any]:
    """`GET /v1/models` as Anthropic lists models (for a request with `anthropic-version`)."""
    data = [anthropic_model(model, model.id) for model in listed]
    return {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None}


def anthropic_model(model: ModelInfo, name: str) -> dict[str, Any]:
    created = datetime.fromtimestamp(model.created, timezone.utc).isoformat().replace("+00:00", "Z")
    return {"type": "model", "id": name, "display_name": name, "created_at": created}


routes = [
    Route("/v1/messages", create_message, methods=["POST"]),
    Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
]
