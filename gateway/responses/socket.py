"""The Responses API's WebSocket mode: the socket `client.responses.connect()` opens at /v1/responses.

Each `response.create` runs a response as `POST /v1/responses` with `stream: true` would, and its events go
out on the socket, one message each, in order; responses on one socket run one after another. The socket
keeps its last response in memory (dialog and tokens), so the next one continues it without reading the
store, with `store: false` too. `response.steer` queues user input for the running response
(steering.py). Errors are `error` events and never close the socket; a client that goes away cancels
what it was running, unless that response is `background`.

Bounds: a message's size (and uvicorn's `ws_max_size` beneath it), sockets per tenant, responses queued
behind the running one (by count, and by what they weigh once parsed), steering queued on the socket (by
count and bytes; dropped, each with its `response.steer.failed`, once the socket goes on with a response
that does not continue the one it waited for), an idle socket's life, and a client that stops reading
(`send_timeout_s`, watched by `_watch_sends`). Pings are answered by uvicorn's WebSocket implementation."""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any, Literal, Union

import anyio
from pydantic import Field, RootModel
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from runtime.cpu import run_cpu

from ..core.requests import refuse_while_draining
from ..errors import APIError, refuse_websocket
from ..jsontext import dumps
from ..protocol import ResponseStatus
from ..web.body import INLINE_BYTES, parse_json
from ..web.middleware import access_log, new_request_id, request_id_var
from .loop.dialog_plan import Remembered
from .loop.needs import ResponsesNeeds, needs_of
from .run_service import LiveResponse, RunService
from .shapes.input_models import MessageItem
from .shapes.items import Delta, Event
from .shapes.request import ResponsesRequest
from .steering import Steer, SteerError, SteerEvent, accepted, failed, pending

logger = logging.getLogger("gateway.responses")

IDLE = 1000  # the close code of a socket that idled out: a normal closure
PARSED_VALUE_BYTES = 48  # about the most one JSON value costs once parsed: its object and the reference to it


class CreateEvent(ResponsesRequest):
    """`response.create`: the fields of `POST /v1/responses`, and the socket's envelope."""

    type: Literal["response.create"]
    stream_id: str | None = Field(None, min_length=1, max_length=128)  # the lane its events carry
    generate: bool | None = None  # false: prepare the response's state, generate nothing (a warm-up)

    def request(self, **changes: Any) -> ResponsesRequest:
        """The request to run, apart from the event (a run changes its request's tools as it prepares)."""
        fields = {name: getattr(self, name) for name in ResponsesRequest.model_fields} | changes
        return ResponsesRequest.model_construct(**fields | {"stream": True})


class ClientEvent(RootModel[Annotated[Union[CreateEvent, SteerEvent], Field(discriminator="type")]]):
    pass


class ResponsesSocketApp:
    """The route's ASGI app (an object, so that Starlette hands it the ASGI `send` itself rather than a
    `WebSocket`): events go out through `send`, not `WebSocket.send`, since a response sends a message
    per token and each layer on the way costs every one of them."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        websocket = WebSocket(scope, receive, send)
        services = needs_of(websocket)
        tenant: str = websocket.scope["state"]["tenant"]  # the middleware checked the key
        config = services.config.server.websocket
        if not config.enabled:
            await refuse_websocket(
                websocket, APIError(404, "The Responses WebSocket mode is off on this gateway: use HTTP.", code="websocket_disabled")
            )
            return
        if services.drain.draining:
            await refuse_websocket(websocket, APIError(503, "The gateway is shutting down.", type="server_error", code="server_shutting_down"))
            return
        if not services.sockets.take(tenant, config.max_per_tenant):
            refusal = f"This project has {config.max_per_tenant} Responses WebSockets open, as many as this gateway allows; close one first."
            await refuse_websocket(websocket, APIError(429, refusal, code="too_many_websockets"))
            return
        try:
            await websocket.accept()
            await ResponsesSocket(websocket, send, services, tenant).serve()
        finally:
            services.sockets.give_back(tenant)


class ResponsesSocket:
    def __init__(self, websocket: WebSocket, send: Send, services: ResponsesNeeds, tenant: str) -> None:
        self.websocket, self.services, self.tenant = websocket, services, tenant
        self._asgi_send = send
        self.config = services.config.server.websocket
        self.limits = services.config.server.body_limits()
        self.creates_in, self.creates = anyio.create_memory_object_stream[tuple[CreateEvent, int]](self.config.max_queued)
        self.active: LiveResponse | None = None
        self.queued = 0  # response.create events received and not finished
        self.queued_weight = 0  # what they weigh once parsed (`parsed_weight`)
        self.remembered: Remembered | None = None  # the last response, to continue without the store
        self.steers: dict[str, list[Steer]] = {}  # accepted steering, by the response it waits for
        self.ended: set[str] = set()  # responses this socket ran (a steer to one is too late, not unknown)
        self.numbers = 0  # sequence numbers of the socket's own events (steering), apart from any response's
        self.last_activity = time.monotonic()
        self._sending = 0  # sends under way (a steering event's may wait beside a response's)
        self._sending_since = 0.0  # when the sends under way began to be under way

    async def serve(self) -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._respond_in_turn, tasks.cancel_scope)
            tasks.start_soon(self._watch_sends, tasks.cancel_scope)
            try:
                await self._read()
            finally:
                tasks.cancel_scope.cancel()
                self.creates_in.close()

    # -- reading -------------------------------------------------------------------------------------------

    async def _read(self) -> None:
        """Client events until the client leaves or the socket idles out."""
        idle = self.config.idle_timeout_s
        while True:
            left = idle - (time.monotonic() - self.last_activity)
            if self.queued == 0 and left <= 0:
                await self.websocket.close(IDLE, "idle")
                return
            with anyio.move_on_after(left if self.queued == 0 else idle):
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                self.last_activity = time.monotonic()
                await self._dispatch(message.get("text") or message.get("bytes") or b"")

    async def _dispatch(self, data: str | bytes) -> None:
        size = len(data) if isinstance(data, bytes) or len(data) * 4 <= self.limits.max_bytes else len(data.encode())
        if size > self.limits.max_bytes:
            await self._error(
                APIError(413, f"The event is larger than this gateway's limit of {self.limits.max_bytes} bytes.", code="request_too_large"),
                started=time.perf_counter(),
            )
            return
        received = time.perf_counter()
        try:
            event = (await parse_json(data, ClientEvent, self.limits)).root
        except APIError as exc:
            await self._error(exc, started=received)
            return
        if isinstance(event, SteerEvent):
            await self._steer(event, size)
            return
        if self.queued > self.config.max_queued:
            await self._error(
                APIError(429, f"At most {self.config.max_queued} responses may wait on one socket.", code="too_many_queued_responses"),
                event.stream_id,
                received,
            )
            return
        weight = parsed_weight(data) if size <= INLINE_BYTES else await run_cpu(parsed_weight, data)
        if self.queued and self.queued_weight + weight > self.config.max_queued_bytes:
            message = f"The responses waiting on this socket may take at most {self.config.max_queued_bytes} bytes once parsed; wait for them to run."
            await self._error(APIError(429, message, code="too_many_queued_responses"), event.stream_id, received)
            return
        self.queued += 1
        self.queued_weight += weight
        await self.creates_in.send((event, weight))

    # -- responding ----------------------------------------------------------------------------------------

    async def _respond_in_turn(self, socket_scope: anyio.CancelScope) -> None:
        async for event, weight in self.creates:
            try:
                successor: tuple[CreateEvent, list[Steer]] | None = (event, [])
                while successor is not None:  # a steered response's successor, and its own, in turn
                    successor = await self._respond(*successor)
            except WebSocketDisconnect:  # gone: the socket ends
                socket_scope.cancel()
                return
            finally:
                self.queued -= 1
                self.queued_weight -= weight
                self.last_activity = time.monotonic()

    async def _respond(self, event: CreateEvent, steers: list[Steer]) -> tuple[CreateEvent, list[Steer]] | None:
        """Run one response and send its events; then what its steering asks for: the successor to run
        next, if any. `steers` are the input a successor carries (in its `input` already)."""
        request = event.request()
        waiting = self.steers.pop(request.previous_response_id, []) if not steers and request.previous_response_id else []
        await self._drop_pending()  # what waits for another response: the socket went on without it
        if waiting:  # queued for a response that stopped for the client: put in front of its continuation
            request.input = [message for steer in waiting for message in steer.messages] + _as_items(request.input)
        carried = steers or waiting
        started = time.perf_counter()
        request_id_var.set(new_request_id())  # its log lines, the run's among them, name it as an HTTP request's do
        try:
            refuse_while_draining(self.services.drain)
            run = await RunService(self.services).start(request, self.tenant, remembered=self.remembered, generate=event.generate is not False)
        except APIError as exc:
            await self._error(exc, event.stream_id, started)
            for steer in carried:
                await self._send_own(failed(steer, steer.previous_response_id, steer.input, SteerError.SUCCESSOR_FAILED, exc.message))
            return None
        self.active = run
        try:
            async for batch in run.follow():
                await self._send(*(_message(item, event.stream_id) for item in batch))
        finally:
            self.active = None
            if not run.ended and not run.background:  # the client left: stop it, aborting its engine request
                run.cancel()
        if run.taken_over:  # its last events are another replica's, stored
            message = "Another replica took this response over: retrieve it, or resume its stream over HTTP."
            await self._error(APIError(503, message, type="server_error", code="response_taken_over"), event.stream_id, started)
        else:
            self._log_access(200, started)
        response_id = run.id
        self.ended.add(response_id)
        self.remembered = await run.remembered()
        return await self._after(run, event, self.steers.pop(response_id, []))

    async def _after(self, run: LiveResponse, event: CreateEvent, steers: list[Steer]) -> tuple[CreateEvent, list[Steer]] | None:
        """A steered response is continued by a successor with the input; one that waits for the client
        keeps it queued for the client's continuation."""
        if not steers:
            return None
        status, response_id = run.response["status"], run.id
        if status not in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE):
            for steer in steers:
                await self._send_own(
                    failed(steer, response_id, steer.input, SteerError.NOT_ACTIVE, f"The response ended {status}: the input was not applied.")
                )
            return None
        owed = run.owed_input()
        if owed:
            self.steers[response_id] = steers
            for steer in steers:
                await self._send_own(pending(steer, owed))
            return None
        messages = [message for steer in steers for message in steer.messages]
        # The successor inherits the steered response's settings and continues it with the input.
        return event.model_copy(update={"input": messages, "previous_response_id": response_id, "conversation": None, "generate": None}), steers

    # -- steering ------------------------------------------------------------------------------------------

    async def _steer(self, event: SteerEvent, size: int) -> None:
        target, run = event.previous_response_id, self.active
        raw = [message.model_dump(exclude_none=True) for message in event.input] if isinstance(event.input, list) else event.input
        steer = Steer.of(event, raw, size)
        queued = [each for steers in self.steers.values() for each in steers]
        problem: tuple[SteerError, str] | None = None
        if run is None or run.id != target:
            if target in self.ended:
                problem = SteerError.ALREADY_COMPLETED, f"Response '{target}' has ended."
            else:
                problem = SteerError.RESPONSE_NOT_FOUND, f"Response '{target}' is not running on this connection."
        elif run.in_conversation:
            problem = SteerError.NOT_SUPPORTED, "A response bound to a conversation cannot be steered."
        elif not ResponseStatus(run.response["status"]).running:
            problem = SteerError.ALREADY_COMPLETED, f"Response '{target}' has ended."
        elif len(queued) >= self.config.max_pending_steers:
            problem = SteerError.TOO_MANY_PENDING, f"At most {self.config.max_pending_steers} steering inputs may wait on one socket."
        elif sum(each.size for each in queued) + size > self.config.max_pending_steer_bytes:
            problem = (
                SteerError.TOO_MANY_PENDING,
                f"The steering inputs waiting on one socket may come to at most {self.config.max_pending_steer_bytes} bytes.",
            )
        if problem is not None:
            await self._send_own(failed(None, target, raw, *problem))
            return
        assert run is not None
        steer.accept()
        self.steers.setdefault(target, []).append(steer)
        run.steer()
        await self._send_own(accepted(steer))

    async def _drop_pending(self) -> None:
        """Steering input kept for a response that stopped for the client, once the socket goes on with a
        response that does not continue it: that response is forgotten, and its input with it."""
        stale, self.steers = self.steers, {}
        for response_id, steers in stale.items():
            for steer in steers:
                message = "The socket went on with another response: the input was dropped."
                await self._send_own(failed(steer, response_id, steer.input, SteerError.NOT_ACTIVE, message))

    # -- sending -------------------------------------------------------------------------------------------

    async def _error(self, error: APIError, stream_id: str | None = None, started: float | None = None) -> None:
        """An `error` event; with `started`, the refusal of a client's event, logged as a request's would be."""
        event: dict[str, Any] = {"type": "error", "status": error.status, **error.body()}
        if stream_id is not None:
            event["stream_id"] = stream_id
        if started is not None:
            self._log_access(error.status, started)
        await self._send(dumps(event))

    def _log_access(self, status: int, started: float) -> None:
        """A `response.create` answered (200: its response ran; otherwise its error event's status), in the
        access log beside HTTP requests: without it a refusal on a socket leaves no trace."""
        if self.services.config.logging.access_log:
            duration = (time.perf_counter() - started) * 1000
            access_log.info("WEBSOCKET %s response.create %d %.1fms", self.websocket.url.path, status, duration)

    async def _send_own(self, fields: dict[str, Any]) -> None:
        """An event of the socket's own (steering), numbered apart from any response's stream."""
        event = {"type": fields["type"], "sequence_number": self.numbers, **fields}
        self.numbers += 1
        await self._send(dumps(event))

    async def _send(self, *texts: str) -> None:
        """Messages, one per event, in order. uvicorn writes each message whole, waiting only while the
        client's side is full, so sends need no lock; and instead of a deadline around each (a cancel scope
        and a lock cost 12 µs, a sixth of a socket turn's CPU in events), `_watch_sends` ends a socket whose
        client has read nothing for `send_timeout_s`."""
        if self.websocket.application_state is not WebSocketState.CONNECTED:
            raise WebSocketDisconnect()
        send = self._asgi_send
        if not self._sending:
            self._sending_since = time.monotonic()
        self._sending += 1
        try:
            for text in texts:
                await send({"type": "websocket.send", "text": text})
        except OSError:  # the server's word for a client that is gone
            raise WebSocketDisconnect(1006) from None
        finally:
            self._sending -= 1

    async def _watch_sends(self, socket_scope: anyio.CancelScope) -> None:
        """Wakes about once a second: a send under way longer than `send_timeout_s` ends the socket (and
        with it the response it sends, whose engine request is aborted)."""
        timeout = self.services.config.server.send_timeout_s
        while True:
            await anyio.sleep(min(1.0, timeout / 4))
            if self._sending and time.monotonic() - self._sending_since > timeout:
                logger.warning("a WebSocket client read nothing for %g s; the socket is closed and its response stopped", timeout)
                socket_scope.cancel()
                return


def _message(event: Event | Delta, stream_id: str | None) -> str:
    """An event as one WebSocket message: its JSON (a delta's from its prebuilt SSE frame), with the lane
    it belongs to."""
    if isinstance(event, Delta):
        frame = event.frame()
        data = frame[frame.index(b"\ndata: ") + 7 : -2].decode()
    else:
        data = dumps(event)
    if stream_id is None:
        return data
    return '{"stream_id":' + dumps(stream_id) + "," + data[1:]


def parsed_weight(data: str | bytes) -> int:
    """About the most an event weighs once parsed: its text, and a value's cost for each value it may hold
    (every value but the first follows a comma or a colon; a separator inside a string overcounts, which
    errs on the safe side). 8 MB of numbers weigh ~40 MB parsed: counted by their bytes alone, they pass."""
    if isinstance(data, str):
        return len(data) + PARSED_VALUE_BYTES * (1 + data.count(",") + data.count(":"))
    return len(data) + PARSED_VALUE_BYTES * (1 + data.count(b",") + data.count(b":"))


def _as_items(input: Any) -> list[Any]:
    return [MessageItem(role="user", content=input)] if isinstance(input, str) else list(input)
