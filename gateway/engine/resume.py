"""An engine call that outlives the engine: a generation the engine broke off goes on from its tokens.

vLLM's completions are token in, token out, and the gateway keeps every token it received: when the
engine fails mid-answer (its connection reset, its body cut off, a 5xx, an error in the stream, an
abort), the same generation is asked again as the prompt followed by those tokens, and the engine goes
on where the first left off. The reader (a run's turn, a side call) sees one stream of chunks: nothing
repeated, nothing missing, the parser's state and the items' ids unchanged. It is how a run adopted by
another replica goes on (responses/loop/adoption.py), at the scale of one engine call. The stream's own
loop reads on from the new request (client.py's `EngineStream`); this module decides whether and where.

What is retried is the engine's failure only (`EngineBroke`): a request the engine refuses (a 400, the
context's length) or a timeout fails as before. The continuation is generated without the call's
grammar, which starts at the beginning of an answer: the reader checks what it must when whole
(`EngineStream.resumed`; responses/loop/engine_calls.py). Both are bounded: how many times one call may be broken off and go on
(`engine.resume_attempts`), and the time all its continuations may take to open
(`engine.resume_within_s`): the first try goes at once, and while none opens (an engine restarting),
tries follow after a backoff with jitter.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import replace
from typing import Awaitable, Callable

from .completion import EngineBroke, EngineUsage, Sampling
from .harmony import Prompt
from .transport import EngineResponse

logger = logging.getLogger("gateway.engine")

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0

# Opens an engine request on the model's next URL (routing.py): the prompt, its sampling, which attempt;
# the response, its head read, and the URL it came from.
Opener = Callable[[Prompt, Sampling, int], Awaitable[tuple[EngineResponse, str]]]


class Continuation:
    """One engine call's continuations: what it received, and the requests that go on from there."""

    def __init__(
        self,
        prompt: Prompt,
        sampling: Sampling,
        open_next: Opener,
        attempts: int,
        within_s: float,
        on_resume: Callable[[str], None] | None = None,
    ) -> None:
        self._prompt = prompt
        self._sampling = sampling
        self._open_next = open_next
        self._attempts = attempts
        self._within_s = within_s
        self._on_resume = on_resume  # told "resumed" or "given_up" for each break met
        self.received: list[int] = []  # every token received, the continuation's prompt tail
        self._before_last = 0  # tokens received before the engine request open now
        self._deadline: float | None = None  # the time all of this call's continuations must open in
        self.resumes = 0

    def room_left(self) -> bool:
        return len(self.received) < self._sampling.max_tokens

    async def resume(self, broke: EngineBroke) -> tuple[EngineResponse, str]:
        """The continuation's engine request, on the model's next URL; while none opens (an engine
        restarting), tried again after a backoff, until the deadline. Out of attempts or time: `broke`."""
        now = time.monotonic()
        deadline = self._deadline = self._deadline if self._deadline is not None else now + self._within_s
        if self.resumes >= self._attempts or now >= deadline:
            self._told("given_up")
            raise broke
        self.resumes += 1
        received = self.received
        logger.warning("the engine broke off a generation after %d tokens (%s); going on from them", len(received), broke.message)
        sampling = replace(self._sampling, max_tokens=self._sampling.max_tokens - len(received), structural_tag=None)
        prompt = self._prompt + received
        tries = 0
        while True:
            try:
                opened = await self._open_next(prompt, sampling, self.resumes + tries)
            except EngineBroke:
                tries += 1
                if time.monotonic() >= deadline:
                    self._told("given_up")
                    raise
                await asyncio.sleep(backoff(tries, deadline))
                continue
            self._told("resumed")
            self._before_last = len(received)
            return opened

    def usage(self, last: EngineUsage) -> EngineUsage:
        """Usage as one call's: the prompt as first sent (the continuations' prompts also hold what was
        generated), every token generated."""
        prompt_tokens = max(last.prompt_tokens - self._before_last, 0) if last.prompt_tokens else 0
        generated = max(self._before_last + last.completion_tokens, len(self.received))
        return EngineUsage(prompt_tokens, generated, last.cached_tokens)

    def _told(self, outcome: str) -> None:
        if self._on_resume is not None:
            self._on_resume(outcome)


def backoff(failures: int, deadline: float) -> float:
    """The wait before the next try after `failures` in a row: doubling from FIRST_BACKOFF_S up to
    MAX_BACKOFF_S, jittered (a router's instances are not all hit at once), never past `deadline`."""
    wait = min(FIRST_BACKOFF_S * 2.0 ** min(failures - 1, 16), MAX_BACKOFF_S) * random.uniform(0.5, 1.0)
    return min(wait, max(deadline - time.monotonic(), 0.0))
