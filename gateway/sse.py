"""Server-sent events for the streaming endpoints, on sse-starlette."""

from __future__ import annotations

import anyio
from sse_starlette import EventSourceResponse
from starlette.types import Message, Send


class EventStream(EventSourceResponse):
    """sse-starlette's response, minus a cancel scope per write when no send timeout is set.

    sse-starlette wraps every send in `anyio.move_on_after(send_timeout)`, even for `None`; profiling the
    streaming path showed that scope (with the async-library lookup behind it) at ~10% of the gateway's
    CPU. Without a timeout it has nothing to do, so we send directly.
    """

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if self.send_timeout is None:
            await send(message)
        else:
            await super()._send_with_timeout(send, message)

    async def _listen_for_exit_signal_with_grace(self) -> None:
        """sse-starlette cuts every stream the moment the server is told to exit. The gateway drains its
        own (gateway/shutdown.py): a running response gets the grace period and then ends with
        `response.failed`, so no client is left without a terminal event."""
        await anyio.sleep_forever()
