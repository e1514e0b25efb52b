"""Work whose cost a hostile input decides, run where it can be bounded: a worker process.

Extracting a PDF's text, checking arguments against a client's JSON Schema and cleaning a web page can
each cost minutes and gigabytes for a few kilobytes of input (one 2 MB content stream drawn on 1000
pages; 40 nested `anyOf` pairs, 2^40 branches). In a thread such work cannot be stopped, and it holds
the GIL and the CPU lane that every stored response needs. In a worker process it has an address-space
limit (RLIMIT_AS) and a time limit, and it is killed (SIGKILL) when the response it serves ends.

The time limit is kept by the worker itself (an interval timer, SIGALRM) from the moment the work starts,
so a worker that had to be started, or to import the work's modules, first does not eat into it; the
worker then goes on serving. The caller waits `STARTUP_ALLOWANCE_S` longer as a backstop, for work stuck
where a signal cannot reach it, and kills that worker. Workers are anyio's process pool (kept warm
between calls), at most `workers` busy at once.

The workers are shared fairly: each tenant's work queues on its own and a free worker goes to the tenant
served longest ago (runtime/fair.py), and a caller's time limit starts once it has a worker, not while it
waits its turn. Background work nobody waits on (a vector store's ingestion) takes at most `workers - 1`
at once, so a request's PDF or schema check always finds a worker within one piece of work.
"""

from __future__ import annotations

import resource
import signal
from contextlib import AsyncExitStack
from typing import Callable, TypeVar, TypeVarTuple, Unpack

import anyio
import anyio.to_process
from anyio.lowlevel import RunVar

from .fair import FairLimiter

T = TypeVar("T")
Args = TypeVarTuple("Args")

_settings = {"workers": 2, "memory_bytes": 1024**3}
STARTUP_ALLOWANCE_S = 15.0  # beyond a call's own limit: a worker started and its modules imported, a wait for a free one
# Per event loop (tests run several): the workers in turn by tenant, the pool's own limiter (never the one
# that waits: a caller holds a turn first), and the background share.
_turns: RunVar[tuple[FairLimiter, anyio.CapacityLimiter, anyio.CapacityLimiter]] = RunVar("isolation_turns")


class TooCostly(Exception):
    """The work passed its time or memory limit (or its worker died): the input is to blame."""


class WorkFailed(Exception):
    """Raised in the worker in place of whatever else the work raised (a Rust panic is a BaseException
    that does not pickle): a plain message that always travels back."""


class OutOfTime(BaseException):
    """Raised in the worker when the work's time is up (picklable: it travels back to the caller). A
    BaseException, like KeyboardInterrupt, so that the work's own `except Exception` cannot swallow it."""


def configure(workers: int, memory_bytes: int) -> None:
    """Called once at start-up, from the config's `isolation` section."""
    _settings.update(workers=workers, memory_bytes=memory_bytes)


def _limiters() -> tuple[FairLimiter, anyio.CapacityLimiter, anyio.CapacityLimiter]:
    try:
        return _turns.get()
    except LookupError:
        workers = _settings["workers"]
        limiters = FairLimiter(workers), anyio.CapacityLimiter(workers), anyio.CapacityLimiter(max(1, workers - 1))
        _turns.set(limiters)
        return limiters


async def run_isolated(timeout_s: float, function: Callable[[Unpack[Args]], T], *args: Unpack[Args], tenant: str = "", background: bool = False) -> T:
    """`function(*args)` in a worker process, within `timeout_s` from when it has a worker (its tenant's
    turn, and with `background`, the background share); raises TooCostly past its limits. `function`
    must be importable by name, its arguments and its result picklable (exceptions too: return a
    refusal rather than raise one with extra fields)."""
    turns, pool, background_share = _limiters()
    try:
        async with AsyncExitStack() as held:
            if background:
                await held.enter_async_context(background_share)
            await held.enter_async_context(turns.slot(tenant))
            with anyio.fail_after(timeout_s + STARTUP_ALLOWANCE_S):
                return await anyio.to_process.run_sync(
                    _limited, _settings["memory_bytes"], timeout_s, function, *args, cancellable=True, limiter=pool
                )
    except (OutOfTime, TimeoutError):
        raise TooCostly(f"it took longer than {timeout_s:g} s") from None
    except MemoryError:
        raise TooCostly(f"it needed more than {_settings['memory_bytes'] // 1024**2} MB of memory") from None
    except anyio.BrokenWorkerProcess:
        raise TooCostly("its worker process died") from None
    except WorkFailed as exc:
        raise TooCostly(f"it failed ({exc})") from None


def _limited(memory_bytes: int, timeout_s: float, function: Callable[..., T], *args: object) -> T:
    """In the worker: the address-space limit set (once: it can only be lowered), then the work, within
    its time (the worker's main thread runs it, so the alarm interrupts the work itself)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, hard))
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return function(*args)
    except (OutOfTime, MemoryError):
        raise
    except BaseException as exc:  # the work's own failure, whatever it is, travels back as a plain one
        raise WorkFailed(type(exc).__name__) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _out_of_time(signum: int, frame: object) -> None:
    raise OutOfTime()
