"""The deliverer: every replica runs one, sending the outbox's deliveries that are due, at most
`webhooks.max_concurrent` at a time, whichever replica wrote them.

It wakes when a response ending here wrote deliveries, when an attempt ends (a slot is free), and every
`poll_interval_s` (retries that came due, deliveries a dead replica had claimed). A failed attempt (no
answer, or not a 2xx) is tried again after a wait that doubles from `first_retry_s` up to
`max_retry_interval_s`, jittered so that a receiver coming back is not hit by every retry at once, until
`retry_for_s` after the event; then it is given up. Only a claimed batch is ever in memory: a receiver that
is down leaves its backlog in the database, not here.
"""

from __future__ import annotations

import logging
import random
import time
from urllib.parse import urlsplit

import anyio
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from connectors.urls import shown

from ..config import WebhooksConfig
from ..core.sealed import Sealer, Unsealable
from ..metrics import Metrics
from ..storage import StorageError
from ..storage.webhook_outbox import Attempt, Due, Outcome, WebhookOutbox
from ..tracing import child_span, failed
from .sender import NotSent, Sender
from .shares import DeliveryShares
from .signing import opened

log = logging.getLogger("gateway.webhooks")

_PRUNE_EVERY_S = 300.0


class Deliverer:
    def __init__(
        self, config: WebhooksConfig, outbox: WebhookOutbox, sender: Sender, sealer: Sealer, metrics: Metrics, replica: str, replica_lease_s: float
    ) -> None:
        self.config = config
        self.outbox = outbox
        self.sender = sender
        self.sealer = sealer
        self.metrics = metrics
        self.replica = replica
        self.replica_lease_s = replica_lease_s
        # A claim outlives an attempt (bounded by timeout_s) and the writing of its outcome.
        self.claim_s = config.timeout_s + 10.0
        self._in_flight = 0
        self.shares = DeliveryShares(config)  # per tenant, per endpoint, breakers (shares.py)
        self._wake = anyio.Event()
        self._scope = anyio.CancelScope()
        outbox.on_written(self.wake)

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Stop claiming and sending (shutdown, before the sender closes): what was claimed and not answered
        is sent again by the next claimer (the same webhook-id)."""
        self._scope.cancel()

    async def run(self, release_claims: bool) -> None:
        """For the app's lifetime. `release_claims`: this process is the only one on the database (SQLite),
        so claims left there are a previous process's, and are let go at once."""
        with self._scope:
            if release_claims:
                try:
                    await self.outbox.release_claims()
                except StorageError as exc:  # they run out on their own (timeout_s + 10 s)
                    log.warning("earlier webhook claims not let go: %s", exc)
            await self._deliver()

    async def _deliver(self) -> None:
        pruned_at = 0.0
        async with anyio.create_task_group() as attempts:
            while True:
                self._wake = anyio.Event()  # before the claim: a wake-up during it is not lost
                free = self.config.max_concurrent - self._in_flight
                due: list[Due] = []
                if free > 0:
                    try:
                        due = await self.outbox.claim(self.replica, free, self.claim_s, time.time() - self.replica_lease_s, self.shares)
                    except StorageError as exc:
                        log.warning("webhook deliveries not claimed: %s", exc)
                for delivery in due:
                    self._in_flight += 1
                    self.shares.started(delivery)
                    attempts.start_soon(self._attempt, delivery)
                if time.monotonic() - pruned_at > min(_PRUNE_EVERY_S, self.config.keep_s):
                    pruned_at = time.monotonic()
                    attempts.start_soon(self._prune)
                if due and len(due) == free:
                    continue  # more may be due: claim again once a slot frees (the loop waits on it below)
                with anyio.move_on_after(self.config.poll_interval_s):
                    await self._wake.wait()

    async def _attempt(self, due: Due) -> None:
        answered = False
        try:
            attempt, outcome, next_at = await self._send(due)
            answered = outcome is Outcome.DELIVERED
            try:
                await self.outbox.record(due, attempt, outcome, next_at)
            except StorageError as exc:  # its claim runs out, and it is tried again: at least once
                log.warning("webhook %s: the attempt's outcome was not recorded (%s)", due.id, exc)
            except Exception:  # a fault of the gateway's own: this delivery's claim runs out too, the others go on
                log.exception("webhook %s: the attempt's outcome was not recorded", due.id)
        finally:
            self._in_flight -= 1
            self.shares.ended(due, answered)
            if not answered and self.shares.is_open(due.endpoint_id):
                log.warning(
                    "webhook endpoint %s failed %d attempts in a row: left alone for %g s",
                    due.endpoint_id,
                    self.config.breaker_failures,
                    self.config.breaker_open_s,
                )
            self.wake()

    async def _send(self, due: Due) -> tuple[Attempt, Outcome, float | None]:
        started, at = time.monotonic(), time.time()
        status: int | None = None
        error: str | None = None
        # A span of its own per attempt (no parent: the run it reports on ended), naming the host, never the
        # URL's path or query (they may carry a token), nor anything of the secret.
        attributes = {
            "webhook.id": due.id, "webhook.event_type": due.event_type, "webhook.endpoint_id": due.endpoint_id,
            "webhook.attempt": due.attempts + 1, "server.address": urlsplit(due.url).hostname or "",
        }  # fmt: skip
        with child_span("deliver_webhook", Context(), attributes, SpanKind.CLIENT) as span:
            try:
                status = await self.sender.send(due.url, due.id, due.payload, opened(self.sealer, due.secrets, due.tenant, at))
            except NotSent as exc:
                error = str(exc)
            except Unsealable:
                error = "the endpoint's signing secret cannot be opened with this gateway's keys"
            except Exception:  # a fault of the gateway's own fails this attempt, never the deliverer
                log.exception("webhook %s: the attempt failed", due.id)
                error = "the gateway failed while sending it"
            if status is not None:
                span.set_attribute("http.response.status_code", status)
            if status is None or not 200 <= status < 300:
                failed(span, error or f"HTTP {status}")
        attempt = Attempt(self.replica, at, (time.monotonic() - started) * 1000, status, error)
        where = shown(due.url)
        if status is not None and 200 <= status < 300:
            self.metrics.webhook_attempt("delivered", time.time() - due.created_at)
            log.info("webhook %s (%s) delivered to %s (attempt %d)", due.id, due.event_type, where, due.attempts + 1)
            return attempt, Outcome.DELIVERED, None
        why = f"HTTP {status}" if status is not None else error
        wait = self.retry_wait(due.attempts + 1)
        if time.time() + wait > due.created_at + self.config.retry_for_s:
            self.metrics.webhook_attempt("given_up", None)
            log.warning("webhook %s (%s) to %s given up after %d attempts: %s", due.id, due.event_type, where, due.attempts + 1, why)
            return attempt, Outcome.GIVEN_UP, None
        self.metrics.webhook_attempt("retried", None)
        log.info("webhook %s (%s) to %s failed (%s); trying again in %.1f s", due.id, due.event_type, where, why, wait)
        return attempt, Outcome.RETRY, time.time() + wait

    def retry_wait(self, failed_attempts: int) -> float:
        """The wait after the `failed_attempts`-th failure: doubling, capped, its upper half drawn at random."""
        config = self.config
        ceiling = min(config.first_retry_s * 2.0 ** min(failed_attempts - 1, 60), config.max_retry_interval_s)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _prune(self) -> None:
        try:
            await self.outbox.prune(time.time() - self.config.keep_s)
        except StorageError as exc:
            log.warning("ended webhook deliveries not pruned: %s", exc)
        except Exception:  # tried again at the next prune; the deliveries go on
            log.exception("ended webhook deliveries not pruned")
