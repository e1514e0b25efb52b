"""`POST /v1/chat/completions`: the Responses run, told as chat completion chunks or one completion
(frames.py)."""

from __future__ import annotations

import secrets
import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.requests import refuse_while_draining, tenant_of
from ..jsontext import JSONResponse
from ..responses.loop.needs import needs_of
from ..responses.loop.prompt_builder import ChatOptions
from ..responses.routes import event_stream, wait_for_run
from ..responses.run_service import RunService
from ..web.body import parse_body
from .frames import ChatChunks, completion
from .request import ChatRequest


async def create_chat_completion(request: Request) -> Response:
    services = needs_of(request)
    refuse_while_draining(services.drain)
    body = await parse_body(request, ChatRequest, services.config.server.body_limits())
    refuse_while_draining(services.drain)  # again: the body may have finished arriving after SIGTERM
    chat = ChatOptions(tuple(body.stop or ()), body.presence_penalty, body.frequency_penalty, body.logit_bias)
    run = await RunService(services).start(body.to_responses(), tenant_of(request), chat)
    completion_id = f"chatcmpl-{secrets.token_hex(12)}"
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = ChatChunks(completion_id, int(time.time()), run.model_id, include_usage, body.include_reasoning)
        return event_stream(services, run, chunks.frames(run))
    await wait_for_run(request, run)
    await run.result()
    return JSONResponse(completion(completion_id, run, body.include_reasoning))


routes = [Route("/v1/chat/completions", create_chat_completion, methods=["POST"])]
