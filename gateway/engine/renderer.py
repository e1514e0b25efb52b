"""Prompts rendered to token ids without holding up the event loop, shared fairly between tenants.

openai-harmony's tokenizer holds the GIL, and byte-pair encoding is quadratic in the length of an unbroken
piece of text, so a large prompt rendered on the event loop (or in a thread) stalls every other request.
Small prompts, the common case, are rendered inline; larger ones in worker processes that loaded the
vocabulary once, which also write their JSON. Every text's long runs are cut before the tokenizer sees
them (harmony.encode_text), so no render costs more than its length.

The processes are shared: each tenant's renders queue on their own and are served in turn (runtime/fair.py),
so a tenant that sends many large prompts waits behind its own, not another's in front of them; a render
whose request went away leaves the queue unstarted. A worker catches whatever the tokenizer raises
(openai-harmony's Rust panics are BaseExceptions that do not pickle) and returns it as a plain refusal;
a worker that dies is replaced.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import multiprocessing
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, TypeVar

from runtime.cpu import run_cpu
from runtime.fair import FairLimiter

from ..errors import APIError
from .harmony import (
    INLINE_RENDER_CHARS,
    Message,
    Preamble,
    Prompt,
    UnrenderableText,
    encoding,
    render_dicts,
    render_each,
    render_each_dicts,
    render_head,
    render_head_dicts,
    render_messages,
    text_size,
)

logger = logging.getLogger("gateway.renderer")

ResultT = TypeVar("ResultT")
CACHED_PREAMBLES = 64
CACHED_PREAMBLE_TOKENS = 1_000_000  # about 7 MB of prompt JSON
CACHED_MESSAGE_TOKENS = 2_000_000  # about 14 MB of prompt JSON


def _digest(messages: list[Message], salt: bytes = b"") -> bytes:
    return hashlib.sha256(salt + json.dumps([message.to_dict() for message in messages], default=str).encode()).digest()


def _digests(messages: list[Message], tenant: str) -> list[bytes]:
    """One digest per message, salted with the tenant."""
    salt = hashlib.sha256(tenant.encode()).digest()
    return [_digest([message], salt) for message in messages]


class Refused:
    """What a worker returns instead of raising: why the tokenizer could not render the prompt."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _guarded(work: Callable[[list[dict[str, Any]]], ResultT], payload: list[dict[str, Any]]) -> ResultT | Refused:
    """In the worker: the work, or why it failed, as a value that always pickles."""
    try:
        return work(payload)
    except UnrenderableText as exc:
        return Refused(str(exc))
    except BaseException as exc:  # a Rust panic (pyo3's PanicException) included
        return Refused(f"the tokenizer failed ({type(exc).__name__})")


def _refusal(reason: str) -> APIError:
    return APIError(400, f"The conversation could not be tokenised: {reason}.", param="input", code="invalid_value")


class PromptRenderer:
    def __init__(self, processes: int = 2) -> None:
        self._processes = processes
        self._pool: ProcessPoolExecutor | None = None
        self._turns = FairLimiter(processes)  # a render in a process at a time per slot, tenants in turn
        # Rendered preambles by a digest of their messages: an application sends the same instructions and
        # tools on every request, and rendering them costs 0.3-0.5 ms of every first token (openai-harmony
        # renders each formatting token with a BPE encode), a large one (Claude Code's 50 KB) several ms in a
        # worker process. Few of them, and few tokens in all: bounded memory.
        self._heads: OrderedDict[bytes, Prompt] = OrderedDict()
        self._cached_tokens = 0
        # Rendered messages by tenant and digest (a tenant's alone: no other can time whether it sent one).
        self._pieces: OrderedDict[bytes, Prompt] = OrderedDict()
        self._piece_tokens = 0

    def for_tenant(self, tenant: str) -> "TenantRenderer":
        return TenantRenderer(self, tenant)

    async def render(self, preamble: Preamble, dialog: list[Message], tenant: str = "") -> list[int]:
        return (await self.prompt(preamble, dialog, tenant)).ids()

    async def prompt(self, preamble: Preamble, dialog: list[Message], tenant: str = "") -> Prompt:
        """The whole conversation, ending with `<|start|>assistant`."""
        messages = preamble.messages() + dialog
        if text_size(messages) <= INLINE_RENDER_CHARS:
            return _inline(lambda: Prompt.of(render_messages(messages)))
        return await self._in_process(render_dicts, messages, tenant)

    async def each(self, messages: list[Message], tenant: str = "") -> list[Prompt]:
        """Each message as Harmony renders it within a conversation (past the system and developer
        messages, a conversation renders as its messages one after the other, less the analysis that
        `dropped_analysis` names). A message the tenant sent recently is not rendered again: clients that
        keep no state (Chat Completions, the Messages API, Claude Code) send their whole history every turn."""
        large = text_size(messages) > INLINE_RENDER_CHARS
        keys = await run_cpu(_digests, messages, tenant) if large else _digests(messages, tenant)
        found = [self._pieces.get(key) for key in keys]
        missing = [index for index, piece in enumerate(found) if piece is None]
        if missing:
            todo = [messages[index] for index in missing]
            if text_size(todo) <= INLINE_RENDER_CHARS:
                rendered = _inline(lambda: render_each(todo))
            else:
                rendered = await self._in_process(render_each_dicts, todo, tenant)
            for index, piece in zip(missing, rendered):
                found[index] = piece
                self._remember(keys[index], piece)
        for key in keys:
            if key in self._pieces:
                self._pieces.move_to_end(key)
        return [piece for piece in found if piece is not None]

    def _remember(self, key: bytes, piece: Prompt) -> None:
        if len(piece) > CACHED_MESSAGE_TOKENS // 16 or key in self._pieces:
            return
        self._pieces[key] = piece
        self._piece_tokens += len(piece)
        while self._piece_tokens > CACHED_MESSAGE_TOKENS:
            self._piece_tokens -= len(self._pieces.popitem(last=False)[1])

    async def preamble(self, preamble: Preamble, tenant: str = "") -> Prompt:
        """The system and developer messages (rendered together: the system message names the channel
        of the developer message's functions), rendered once for as long as they are among the recent ones."""
        messages = preamble.messages()
        large = text_size(messages) > INLINE_RENDER_CHARS
        key = await run_cpu(_digest, messages) if large else _digest(messages)
        cached = self._heads.get(key)
        if cached is not None:
            self._heads.move_to_end(key)
            return cached
        head = await self._in_process(render_head_dicts, messages, tenant) if large else _inline(lambda: render_head(messages))
        self._heads[key] = head
        self._cached_tokens += len(head)
        while len(self._heads) > CACHED_PREAMBLES or self._cached_tokens > CACHED_PREAMBLE_TOKENS:
            self._cached_tokens -= len(self._heads.popitem(last=False)[1])
        return head

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=self._processes, mp_context=context, initializer=encoding)
        return self._pool

    async def _in_process(self, work: Callable[[list[dict[str, Any]]], ResultT], messages: list[Message], tenant: str) -> ResultT:
        payload = [message.to_dict() for message in messages]
        async with self._turns.slot(tenant):
            pool = self._executor()
            try:
                result = await asyncio.get_running_loop().run_in_executor(pool, _guarded, work, payload)
            except BrokenProcessPool:  # a worker died (killed, out of memory): new processes for the next renders
                if self._pool is pool:
                    self._pool = None
                    pool.shutdown(wait=False, cancel_futures=True)
                logger.error("a renderer process died; it is replaced")
                raise _refusal("the tokenizer's process died") from None
        if isinstance(result, Refused):
            raise _refusal(result.reason)
        return result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class TenantRenderer:
    """The renderer as one tenant's runs use it: their renders queue as that tenant's."""

    def __init__(self, renderer: PromptRenderer, tenant: str) -> None:
        self._renderer, self._tenant = renderer, tenant

    async def prompt(self, preamble: Preamble, dialog: list[Message]) -> Prompt:
        return await self._renderer.prompt(preamble, dialog, self._tenant)

    async def render(self, preamble: Preamble, dialog: list[Message]) -> list[int]:
        return await self._renderer.render(preamble, dialog, self._tenant)

    async def each(self, messages: list[Message]) -> list[Prompt]:
        return await self._renderer.each(messages, self._tenant)

    async def preamble(self, preamble: Preamble) -> Prompt:
        return await self._renderer.preamble(preamble, self._tenant)


def _inline(render: Callable[[], ResultT]) -> ResultT:
    try:
        return render()
    except UnrenderableText as exc:
        raise _refusal(str(exc)) from None
