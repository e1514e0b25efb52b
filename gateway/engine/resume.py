"""An engine call that outlives the engine: a generation the engine broke off goes on from its tokens.

vLLM's completions are token in, token out, and the gateway keeps every token it received: when the
engine fails mid-answer (its connection reset, its body cut off, a 5xx, an error in the stream, an
abort), the same generation is asked again as the prompt followed by those tokens, and the engine goes
on where the first left off. The reader (a run's turn, a side call) sees one stream of chunks: nothing
repeated, nothing missing, the parser's state and the items' ids unchanged. It is how a run adopted by
another replica goes on (responses/loop/adoption.py), at the scale of one engine call.

What is retried is the engine's failure only (`EngineBroke`): a request the engine refuses (a 400, the
context's length) or a timeout fails as before. The continuation is generated without the call's
grammar, which starts at the beginning of an answer (the reader checks what it must when whole, as for
an adopted call). Both are bounded: how many times one call may be broken off and go on
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
from typing import AsyncIterator, Awaitable, Callable

from .client import EngineBroke, EngineChunk, EngineStream, EngineUsage, FinishReason, Sampling
from .harmony import Prompt

logger = logging.getLogger("gateway.engine")

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0

# Opens an engine call on the model's next URL (routing.py): the prompt, its sampling, which attempt.
Opener = Callable[[Prompt, Sampling, int], Awaitable[EngineStream]]


class ResumingStream:
    """The chunks of one engine call, across as many engine requests as its engine's failures take."""

    def __init__(
        self,
        first: EngineStream,
        prompt: Prompt,
        sampling: Sampling,
        open_next: Opener,
        attempts: int,
        within_s: float,
        on_resume: Callable[[str], None] | None = None,
    ) -> None:
        self._stream = first
        self._prompt = prompt
        self._sampling = sampling
        self._open_next = open_next
        self._attempts = attempts
        self._within_s = within_s
        self._on_resume = on_resume  # told "resumed" or "given_up" for each failure met
        self._generated: list[int] = []  # every token received, the continuation's prompt tail
        self._before_last = 0  # tokens received before the engine request open now
        self.resumes = 0
        self.usage = EngineUsage()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aiter__(self) -> AsyncIterator[EngineChunk]:
        generated = self._generated
        deadline: float | None = None  # the time all of this call's resumptions must fit in
        while True:
            try:
                async for chunk in self._stream:
                    if chunk.finish_reason is FinishReason.ABORT:  # the engine gave the request up: go on elsewhere
                        chunk.finish_reason = None
                        generated += chunk.token_ids
                        if chunk.token_ids:
                            yield chunk
                        raise EngineBroke(502, "The engine aborted the generation.")
                    generated += chunk.token_ids  # before the reader sees it: a turn puts a prefill before the first
                    yield chunk
                self._count(self._stream.usage)
                return
            except EngineBroke as broke:
                await self._stream.aclose()
                deadline = deadline if deadline is not None else time.monotonic() + self._within_s
                if self.resumes >= self._attempts or time.monotonic() >= deadline:
                    self._told("given_up")
                    raise
                if len(generated) >= self._sampling.max_tokens:  # broken off after its last token: it was cut there
                    self._count(EngineUsage())
                    yield EngineChunk([], FinishReason.LENGTH)
                    return
                self.resumes += 1
                self._stream = await self._resume(broke, deadline)

    async def _resume(self, broke: EngineBroke, deadline: float) -> EngineStream:
        """The continuation's engine request, on the model's next URL; while none can be opened (an engine
        restarting), tried again after a backoff until `deadline`."""
        generated = self._generated
        logger.warning("the engine broke off a generation after %d tokens (%s); going on from them", len(generated), broke.message)
        sampling = replace(self._sampling, max_tokens=self._sampling.max_tokens - len(generated), structural_tag=None)
        prompt = self._prompt + generated
        tries = 0
        while True:
            try:
                stream = await self._open_next(prompt, sampling, self.resumes + tries)
            except EngineBroke:
                tries += 1
                if time.monotonic() >= deadline:
                    self._told("given_up")
                    raise
                await asyncio.sleep(backoff(tries, deadline))
                continue
            self._told("resumed")
            self._before_last = len(generated)
            return stream

    def _count(self, last: EngineUsage) -> None:
        """Usage as one call's: the prompt as first sent (the continuations' prompts also hold what was
        generated), every token generated."""
        prompt_tokens = max(last.prompt_tokens - self._before_last, 0) if last.prompt_tokens else 0
        self.usage = EngineUsage(prompt_tokens, max(self._before_last + last.completion_tokens, len(self._generated)), last.cached_tokens)

    def _told(self, outcome: str) -> None:
        if self._on_resume is not None:
            self._on_resume(outcome)


def backoff(failures: int, deadline: float) -> float:
    """The wait before the next try after `failures` in a row: doubling from FIRST_BACKOFF_S up to
    MAX_BACKOFF_S, jittered (a router's instances are not all hit at once), never past `deadline`."""
    wait = min(FIRST_BACKOFF_S * 2.0 ** min(failures - 1, 16), MAX_BACKOFF_S) * random.uniform(0.5, 1.0)
    return min(wait, max(deadline - time.monotonic(), 0.0))
