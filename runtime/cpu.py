"""CPU-bound work done off the event loop, one piece at a time.

A worker thread keeps the event loop responsive only while it waits: while it runs Python it holds the
GIL, and the loop's thread gets the GIL back only when the holder is asked to let go, once per switch
interval. With several CPU-bound threads at once, the loop waits behind each of them in turn, so its
stalls grow with the number of requests doing such work together (measured: 8 long requests validated
at once stalled the loop 30 to 60 ms). So such work goes through one lane: the loop competes with one
thread at most, and the switch interval is short, so each of its waits is about a millisecond.

Work that waits on I/O (SQLite, Docker's API) does not go through the lane: it lets go of the GIL.
"""

from __future__ import annotations

import sys
from typing import Callable, TypeVar, TypeVarTuple, Unpack

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

T = TypeVar("T")
Args = TypeVarTuple("Args")

SWITCH_INTERVAL_S = 0.001  # CPython's default is 5 ms: the longest a thread holds the GIL when asked for it

# One lane per event loop: a limiter belongs to the loop it was made in (tests run several loops).
_lane: RunVar[anyio.CapacityLimiter] = RunVar("cpu_lane")


def use_short_switch_interval() -> None:
    """Called once at start-up: the gateway's threads hand the GIL back to the loop within a millisecond."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


async def run_cpu(function: Callable[[Unpack[Args]], T], *args: Unpack[Args]) -> T:
    """Run `function(*args)` in a worker thread, after the CPU-bound work queued before it."""
    try:
        lane = _lane.get()
    except LookupError:
        lane = anyio.CapacityLimiter(1)
        _lane.set(lane)
    return await anyio.to_thread.run_sync(function, *args, limiter=lane)
