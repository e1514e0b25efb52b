"""HTTP endpoints of the Responses API."""

from __future__ import annotations

from typing import AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from runtime.numbers import decimal

from ..core.requests import include_query, refuse_while_draining, tenant_of
from ..core.sealed import Purpose
from ..errors import APIError, bad_request, not_found
from ..jsontext import JSONResponse
from ..storage import StorageError
from ..storage.paging import listing, page_query, unknown_after
from ..storage.response_store import RUNNING, StoredResponse
from ..web.body import parse_body
from ..web.sse import EventStream
from .events.log import sequence_number, sse_frame
from .loop.compaction import CompactRequest, compacted_response, summarize
from .loop.dialog_plan import plan_dialog
from .loop.follow import follow_stored, storage_unavailable, stored_before
from .loop.needs import ResponsesNeeds, needs_of
from .run_service import LiveResponse, RunService
from .shapes.request import ResponsesRequest
from .socket import ResponsesSocketApp
from .tools.registry import check_include


async def create_response(request: Request) -> Response:
    services = needs_of(request)
    refuse_while_draining(services.drain)
    body = await parse_body(request, ResponsesRequest, services.config.server.body_limits())
    refuse_while_draining(services.drain)  # again: the body may have finished arriving after SIGTERM
    run = await RunService(services).start(body, tenant_of(request))
    if body.stream:
        return event_stream(services, run, _frames(services, run))
    if run.background:  # answered at once; the client polls, resumes or cancels
        return JSONResponse(run.snapshot())
    await wait_for_run(request, run)
    return JSONResponse(await run.result())


async def compact(request: Request) -> Response:
    """`POST /v1/responses/compact`: the conversation (input, or a stored response and input) as the user's
    messages and one compaction item holding the model's summary, sealed."""
    services = needs_of(request)
    refuse_while_draining(services.drain)
    body = await parse_body(request, CompactRequest, services.config.server.body_limits())
    tenant = tenant_of(request)
    slot = services.runs.admission.admit(tenant)  # an engine call, as a response's: counted as one
    try:
        plan = await plan_dialog(services, body.as_request(), tenant)
        messages = plan.dialog.messages
        if not messages:
            raise bad_request("There is nothing to compact: give input, or a previous_response_id.", param="input")
        summary = await summarize(
            services, services.engines.route(body.model), messages, plan.dialog.session_key, instructions=body.instructions, tenant=tenant
        )
    finally:
        slot.release()
    return JSONResponse(compacted_response(messages, summary, services.sealer.seal(summary.text, Purpose.COMPACTION, tenant)))


def event_stream(services: ResponsesNeeds, run: LiveResponse, frames: AsyncIterator[bytes]) -> EventStream:
    """The SSE response for a run's frames, counted while it lasts. It ends early when the client goes
    away, reads nothing for `send_timeout_s`, or still reads a while after the shutdown grace period;
    then the run is cancelled, aborting its engine request."""
    return sse_response(services, _reading(services, run, frames))


def sse_response(services: ResponsesNeeds, frames: AsyncIterator[bytes]) -> EventStream:
    drain = services.drain
    return EventStream(
        frames, sep="\n", ping=15, send_timeout=services.config.server.send_timeout_s, give_up=lambda: drain.past_grace(READER_GRACE_S)
    )


READER_GRACE_S = 2.0  # how long after the shutdown grace period a slow reader may go on reading


async def _reading(services: ResponsesNeeds, run: LiveResponse, frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    gauge = services.metrics.active_streams
    gauge.inc()
    try:
        async for frame in frames:
            yield frame
    finally:
        gauge.dec()
        if not run.ended and not run.background:  # a background run goes on without its reader
            run.cancel()


async def _frames(services: ResponsesNeeds, run: LiveResponse, after: int = -1) -> AsyncIterator[bytes]:
    """The run's events as SSE frames, from the one after sequence number `after` on: those a replica
    that began an adopted run stored, read back first; then the run's log here; if another replica took
    the run over meanwhile, the rest as that replica stored it."""
    if after + 1 < run.first_logged:
        try:
            async for stored_to, frames in stored_before(services.store, run.id, after, run.first_logged):
                after = stored_to  # where a storage failure is reported from
                yield frames
        except StorageError:
            yield storage_unavailable(after + 1)
            return
        after = run.first_logged - 1
    async for batch in run.follow():
        if after >= 0:
            batch = [event for event in batch if sequence_number(event) > after]
        if batch:
            after = sequence_number(batch[-1])
            yield b"".join(map(sse_frame, batch))
    if run.taken_over:
        async for frame in follow_stored(services.store, run.id, after):
            yield frame


async def wait_for_run(request: Request, run: LiveResponse) -> None:
    """Wait for the run's end; if the client goes away first, cancel it, which aborts the engine request."""
    async with anyio.create_task_group() as group:

        async def wait() -> None:
            await run.wait()
            group.cancel_scope.cancel()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            run.cancel()
            group.cancel_scope.cancel()

        group.start_soon(wait)
        group.start_soon(watch)


async def count_input_tokens(request: Request) -> Response:
    """`POST /v1/responses/input_tokens`: exact, since the gateway renders the prompt itself."""
    services = needs_of(request)
    body = await parse_body(request, ResponsesRequest, services.config.server.body_limits())
    count = await RunService(services).input_tokens(body, tenant_of(request))
    return JSONResponse({"object": "response.input_tokens", "input_tokens": count})


async def retrieve_response(request: Request) -> Response:
    """The response as it is now. A background response running here is read live; one running on
    another replica is read from the store, which its replica keeps up to date. With `stream=true`, its
    events from the one after `starting_after` on, then following it until it ends."""
    services = needs_of(request)
    check_include(include_query(request))
    stream, after = _stream_query(request)
    run = _live(request)
    if not stream:
        if run is not None and run.response["status"] not in RUNNING:
            # Ended here, its final record being written: shown once stored, so that a client told it ended
            # can continue it at once (a continuation reads the store).
            with anyio.move_on_after(FINAL_WRITE_WAIT_S):
                await run.wait()
            if run.ended:
                run = None
        return JSONResponse(run.snapshot() if run is not None else (await _stored(request)).response)
    if run is not None:
        return event_stream(services, run, _frames(services, run, after))
    stored = await _stored(request)
    if not stored.response.get("background"):
        raise bad_request("Only responses created with background=true can be streamed again.", param="stream")
    return sse_response(services, follow_stored(services.store, stored.response["id"], after))


async def cancel_response(request: Request) -> Response:
    """Stop a background response (its engine request aborted, a running tool call interrupted), here or
    on the replica running it; one that already ended is answered as it is. Only background responses
    can be cancelled."""
    services = needs_of(request)
    run = _live(request)
    if run is not None:
        run.cancel()
        await run.wait()
        return JSONResponse(run.response)
    stored = await _stored(request)
    if not stored.response.get("background"):
        raise bad_request("Only responses created with background=true can be cancelled.", param="response_id")
    if stored.status in RUNNING:
        await services.replicas.cancel(stored, wait_s=CANCEL_WAIT_S)
        stored = await _stored(request)
    return JSONResponse(stored.response)


CANCEL_WAIT_S = 30.0  # how long a cancel waits for another replica to stop the response
FINAL_WRITE_WAIT_S = 5.0  # how long a retrieve waits for an ended response's final record


def _live(request: Request) -> LiveResponse | None:
    """The tenant's background response of this id, if it runs in this process."""
    return RunService(needs_of(request)).live(request.path_params["response_id"], tenant_of(request))


def _stream_query(request: Request) -> tuple[bool, int]:
    params = request.query_params
    stream = params.get("stream", "false")
    if stream not in ("true", "false"):
        raise bad_request("stream must be 'true' or 'false'.", param="stream")
    after = params.get("starting_after")
    if after is None:
        return stream == "true", -1
    if stream != "true":
        raise bad_request("'starting_after' is only for streams: add stream=true.", param="starting_after")
    sequence_number = decimal(after)
    if sequence_number is None:
        raise bad_request("starting_after must be a sequence number (an integer of 0 or more).", param="starting_after")
    return True, sequence_number


async def delete_response(request: Request) -> Response:
    response_id = request.path_params["response_id"]
    services = needs_of(request)
    if not await services.store.delete(response_id, tenant_of(request)):
        raise _missing(response_id)
    return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


async def list_input_items(request: Request) -> Response:
    stored = await _stored(request)
    check_include(include_query(request))
    query = page_query(request)
    items = stored.input_items if query.ascending else stored.input_items[::-1]
    if query.after is not None:
        ids = [item["id"] for item in items]
        if query.after not in ids:
            raise unknown_after(query.after)
        items = items[ids.index(query.after) + 1 :]
    return JSONResponse(listing(items[: query.limit], len(items) > query.limit))


async def _stored(request: Request) -> StoredResponse:
    """The tenant's stored response, without its dialog (no endpoint shows it)."""
    response_id = request.path_params["response_id"]
    services = needs_of(request)
    stored = await services.store.get(response_id, tenant_of(request), dialog=False)
    if stored is None:
        raise _missing(response_id)
    return stored


def _missing(response_id: str) -> APIError:
    return not_found(f"No response found with id '{response_id}'.", param="response_id")


routes = [
    Route("/v1/responses", create_response, methods=["POST"]),
    WebSocketRoute("/v1/responses", ResponsesSocketApp()),
    Route("/v1/responses/input_tokens", count_input_tokens, methods=["POST"]),
    Route("/v1/responses/compact", compact, methods=["POST"]),
    Route("/v1/responses/{response_id}", retrieve_response, methods=["GET"]),
    Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
    Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
    Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
]
