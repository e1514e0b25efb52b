"""Kernels started ahead of need: a new session takes one at once while the pool starts the next."""

from __future__ import annotations

import logging

import anyio
from opentelemetry import trace

from .backend import Backend, Kernel
from .network import NetworkGrant

log = logging.getLogger("sandbox")
_tracer = trace.get_tracer("harmony-gateway")


class KernelPool:
    def __init__(self, backend: Backend, size: int) -> None:
        self._backend = backend
        self._size = size
        self._kernels: list[Kernel] = []
        self._refill = anyio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._kernels)

    async def take(self, network: NetworkGrant | None = None) -> Kernel:
        """A started kernel; one with a network is started for its session alone (pooled ones have none)."""
        if network is None:
            self._refill.set()
            if self._kernels:
                return self._kernels.pop()
        # Started on demand: the call waits for it, so it is a span of its own under the call's (tracing).
        with _tracer.start_as_current_span("sandbox.start", attributes={"sandbox.backend": type(self._backend).__name__}):
            return await self._backend.create(network)

    def refill(self) -> None:
        self._refill.set()

    async def keep_full(self) -> None:
        while not self._closed:
            await self._refill.wait()
            self._refill = anyio.Event()
            while not self._closed and len(self._kernels) < self._size:
                try:
                    kernel = await self._backend.create()
                except Exception as exc:  # the next take creates directly and reports the error
                    log.error("could not start a sandbox for the pool: %s", exc)
                    await anyio.sleep(5)
                    break
                if self._closed:
                    await kernel.destroy()
                    return
                self._kernels.append(kernel)

    def close(self) -> list[Kernel]:
        """Stop filling; the kernels it held, for the caller to destroy."""
        self._closed = True
        self._refill.set()
        kernels, self._kernels = self._kernels, []
        return kernels
