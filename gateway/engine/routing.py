"""Engines by model: a request's `model` picks the engine URLs that serve it.

Each configured URL is an `EngineClient` with its own connections, limits and health; the URLs naming
one model make a `ModelEngine`. Several instances of a model are meant to sit behind one URL served by
a router (vLLM's production stack, llm-d, HAProxy; README: "Several models and engines"): the gateway does not schedule
across GPUs, it sends each conversation's stable key in `engine.session_header` for the router to keep
a chain on the instance holding its prefix cache. Where a model has several URLs, a conversation keeps
to one of those that answer (by its key), and a generation broken off goes on at the next (resume.py).

Health is read in the background (`Engines.watch`): every `health_interval_s`, each URL's /health and,
while it answers, its /v1/models (a restarted engine may serve another model or length). A URL that
refused a connection is skipped until it answers again; a model none of whose URLs answer fails at
once with a 503 `engine_unavailable`, and an engine down at start stops nothing but its own model.
"""

from __future__ import annotations

import logging
import time
import zlib
from fnmatch import fnmatchcase
from typing import Callable, Mapping

import anyio

from ..config import EngineConfig
from ..errors import APIError, server_error
from .client import EngineClient
from .completion import Bounds, EngineBroke, ModelInfo, Sampling
from .harmony import Prompt
from .resume import Continuation, backoff
from .stream import EngineStream
from .transport import EngineResponse

logger = logging.getLogger("gateway.engine")

# Told each failure a model's generation met mid-answer: the model, and "resumed" or "given_up".
ResumeHook = Callable[[str, str], None]


class ModelEngine:
    """One model and the engine URLs that serve it, in the order configured."""

    def __init__(self, clients: list[EngineClient], on_resume: ResumeHook | None = None) -> None:
        self.clients = clients
        self.config = clients[0].config  # the model's settings: its first URL's
        self._on_resume = on_resume

    @property
    def name(self) -> str | None:
        """The served model name: configured, or read from its engine; None while neither is known."""
        if self.config.model is not None:
            return self.config.model
        known = self.clients[0].known
        return known.id if known is not None else None

    def names(self) -> list[str]:
        name = self.name
        return [*([name] if name is not None else []), *self.config.aliases]

    @property
    def known(self) -> ModelInfo | None:
        """The served model as an engine last described it (an answering one first), if one did."""
        return next((client.known for client in [*self._answering(), *self.clients] if client.known is not None), None)

    @property
    def answers(self) -> bool:
        """Whether one of its URLs answers, as the last health check (or connection) found."""
        return any(client.up for client in self.clients)

    async def model(self) -> ModelInfo:
        """The served model as an answering engine reports it (asked once, then read by the health checks)."""
        known = self.known
        if known is not None:  # also while its engines restart: a run between two turns waits for them (generate)
            return known
        failure: APIError | None = None
        for client in self._answering():
            try:
                return await client.refresh()
            except EngineBroke as exc:
                failure = exc
        raise failure or self._unavailable()

    def _answering(self) -> list[EngineClient]:
        return [client for client in self.clients if client.up]

    def _unavailable(self) -> EngineBroke:
        urls = ", ".join(client.url for client in self.clients)
        return EngineBroke(503, f"No engine serving the model '{self.name or '?'}' answers ({urls}); try again shortly.", "engine_unavailable")

    def _client_for(self, session_key: str | None, attempt: int, patient: bool) -> EngineClient:
        """The URL for a conversation: one of those answering, the same while they do (by its key); each
        further attempt the next one. `patient`: when none answers, every URL is tried in turn anyway."""
        candidates = self._answering() or (self.clients if patient else [])
        if not candidates:
            raise self._unavailable()
        start = zlib.crc32(session_key.encode()) if session_key else 0
        return candidates[(start + attempt) % len(candidates)]

    async def generate(
        self,
        prompt: Prompt,
        sampling: Sampling,
        session_key: str | None = None,
        trace: Mapping[str, str] | None = None,
        patient: bool = False,
    ) -> EngineStream:
        """Start a streamed completion that goes on where its engine breaks it off (resume.py). A failure
        before the first chunk is tried at the model's other answering URLs; `patient` (a run already under
        way: its next turn after a tool's output) also waits for an engine that restarts, as long as a
        broken-off generation is waited for (`resume_within_s`). A new request fails at once instead."""
        config = self.config

        async def open_on(prompt: Prompt, sampling: Sampling, attempt: int) -> tuple[EngineResponse, str]:
            client = self._client_for(session_key, attempt, patient=True)
            return await client.open(prompt, sampling, session_key, trace), client.url

        response, client = await self._first(prompt, sampling, session_key, trace, patient)
        hook = self._on_resume
        told = (lambda outcome: hook(self.name or "", outcome)) if hook is not None else None
        continuation = Continuation(prompt, sampling, open_on, config.resume_attempts, config.resume_within_s, told)
        return EngineStream(response, client.url, Bounds.of(config, sampling), continuation, held=client.sends_grammar(sampling))

    async def _first(
        self, prompt: Prompt, sampling: Sampling, session_key: str | None, trace: Mapping[str, str] | None, patient: bool
    ) -> tuple[EngineResponse, EngineClient]:
        deadline = time.monotonic() + self.config.resume_within_s
        tried = 0
        while True:
            client = self._client_for(session_key, tried, patient)
            try:
                return await client.open(prompt, sampling, session_key, trace), client
            except EngineBroke:
                tried += 1
                if patient:
                    if time.monotonic() >= deadline:
                        raise
                    await anyio.sleep(backoff(tried, deadline))
                elif tried >= len(self.clients) or not self._answering():
                    raise

    async def check(self) -> None:
        """One health check of each URL: up or not, and its model read again while it answers."""
        async with anyio.create_task_group() as checks:
            for client in self.clients:
                checks.start_soon(_check, client)

    def grammar_broken(self, url: str) -> bool:
        """The engine at `url` wrote what a grammar sent to it forbids: none is sent to it from now on. True
        the first time."""
        client = next((client for client in self.clients if client.url == url), None)
        return client is not None and client.grammar.broke()

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


async def _check(client: EngineClient) -> None:
    up = await client.healthy()
    if up:
        before = client.known
        # Bounded as a whole: an engine that holds /v1/models open does not hold up the next round.
        with anyio.move_on_after(client.config.connect_timeout_s) as waited:
            try:
                now = await client.refresh()
                if before is not None and (before.id, before.max_model_len) != (now.id, now.max_model_len):
                    logger.warning("the engine at %s now serves %s (max_model_len %s)", client.url, now.id, now.max_model_len)
            except APIError as exc:
                logger.warning("the engine at %s answers /health but not /v1/models: %s", client.url, exc.message)
                up = False
        up = up and not waited.cancelled_caught
    if up != client.up:
        logger.warning("the engine at %s is %s", client.url, "back" if up else "down")
    client.up = up


class Engines:
    """Every configured model, found by the names a request's `model` may give."""

    def __init__(self, configs: list[EngineConfig], on_resume: ResumeHook | None = None) -> None:
        grouped: dict[str | None, list[EngineClient]] = {}
        for config in configs:
            grouped.setdefault(config.model, []).append(EngineClient(config))
        self.models = [ModelEngine(clients, on_resume) for clients in grouped.values()]
        self.interval_s = min(config.health_interval_s for config in configs)
        self._index: dict[str, ModelEngine] = {}
        self._ambiguous: dict[str, list[str]] = {}  # short names more than one model has: which
        self._patterns: list[tuple[str, ModelEngine]] = []
        self._reindex()

    def _reindex(self) -> None:
        """Names to models, made again when names may have changed (an engine read): routing is one lookup.

        A name with an organisation (`openai/gpt-oss-20b`) is also reached without it (`gpt-oss-20b`), as
        clients send it (LiteLLM's `openai/` provider strips the prefix), unless another model's name or
        alias is that, or another model's name shortens to it too."""
        index = {name: engine for engine in reversed(self.models) for name in engine.names() if "*" not in name}
        # Aliases with `*` match names by pattern (`claude-*`: Claude Code's default names), tried in order.
        self._patterns = [(name, engine) for engine in self.models for name in engine.names() if "*" in name]
        shortened: dict[str, dict[str, ModelEngine]] = {}
        for engine in self.models:
            for name in engine.names():
                if "/" in name:
                    shortened.setdefault(name.rsplit("/", 1)[1], {})[name] = engine
        self._ambiguous = {}
        for short, named in shortened.items():
            if short in index or not short:
                continue
            if len(set(named.values())) == 1:
                index[short] = next(iter(named.values()))
            else:
                self._ambiguous[short] = sorted(named)
        self._index = index

    def route(self, model: str | None) -> ModelEngine:
        """The model a request names (none: the first configured); an unknown name is OpenAI's 404."""
        if not model:
            return self.models[0]
        found = self._index.get(model)
        if found is None:  # a name learned since (an engine read for the first time)?
            self._reindex()
            found = self._index.get(model)
        if found is not None:
            return found
        matched = next((engine for pattern, engine in self._patterns if fnmatchcase(model, pattern)), None)
        if matched is not None:
            return matched
        if model in self._ambiguous:
            names = ", ".join(self._ambiguous[model])
            raise APIError(404, f"The model '{model}' is ambiguous here: name one of {names}.", param="model", code="model_not_found")
        if any(engine.name is None for engine in self.models):  # an engine not yet read may serve it
            raise server_error(503, f"The engine that may serve '{model}' has not answered yet; try again shortly.", "engine_unavailable")
        raise APIError(404, f"The model '{model}' does not exist or you do not have access to it.", param="model", code="model_not_found")

    async def listed(self) -> list[tuple[ModelInfo, ModelEngine]]:
        """Each model whose name is known, as its engine describes it (configured, while it does not answer)."""
        listed, failure = [], None
        for engine in self.models:
            known = engine.known
            if known is None and engine.name is None:
                try:
                    known = await engine.model()
                except APIError as exc:
                    failure = exc
                    continue
            listed.append((known or ModelInfo(id=engine.name or "", max_model_len=None), engine))
        if failure is not None and not listed:  # nothing to show: the engine's failure says why
            raise failure
        return listed

    def health(self) -> list[dict[str, object]]:
        """Each URL: its model, whether it answers, its version and whether it enforces grammars (grammar_trust.py)."""
        return [
            {"model": engine.name, "url": client.url, "up": client.up, "version": client.grammar.version, "grammar": client.grammar.enforcement}
            for engine in self.models
            for client in engine.clients
        ]

    async def check(self) -> None:
        """Every model's URLs checked once (at start-up: the models' names read before requests name them)."""
        async with anyio.create_task_group() as checks:
            for engine in self.models:
                checks.start_soon(engine.check)
        self._reindex()

    async def watch(self) -> None:
        """For the app's lifetime: every model's URLs checked, again and again."""
        while True:
            await anyio.sleep(self.interval_s)
            await self.check()

    async def aclose(self) -> None:
        for engine in self.models:
            await engine.aclose()
