"""Every replica's scheduler: fires the automations that are due (each occurrence once, whichever replica takes
it: storage/automation_store.py), delivers their invocations (a new session with its input, or the
instructions to an existing session once it is idle), and settles each one as its turn ends.

It sleeps until the next due time it knows of (at most `POLL_S`: another replica may add a sooner one), or
until woken by this replica's own change. A gateway down across due times fires the latest missed occurrence
once when back; missed periods are not fired in a burst."""

from __future__ import annotations

import logging
import time

import anyio

from ..core.models import StrictModel
from ..errors import APIError
from ..protocol import InvocationStatus, SessionStatus, TurnStatus
from ..storage import StorageError
from ..storage.automation_store import Invocation
from .automations import firing
from .models import Environment, InputMessage
from .needs import AgentsNeeds
from .sessions import environment, send, session_record, snapshot, start

log = logging.getLogger("gateway.agents.automations")

POLL_S = 1.0  # the longest sleep: due times other replicas set are seen within it
MIN_SLEEP_S = 0.01  # one still due after a pass: another replica's transaction holds it (or a full batch was fired)
BATCH = 100  # automations fired, invocations claimed or settled, per pass
DELIVERY_LEASE_S = 120.0  # a claim on an invocation's delivery (making a hosted environment takes a while)
MAX_DELIVERING = 16  # deliveries under way at once on a replica


class _Kept(StrictModel):
    """A new_session target's environment and input as kept (checked when the automation was)."""

    environment: Environment
    input: list[InputMessage]


class DeliveryFailed(Exception):
    def __init__(self, code: str, message: str, pause: bool = False) -> None:
        super().__init__(message)
        self.error, self.pause = {"code": code, "message": message}, pause


class Scheduler:
    def __init__(self) -> None:
        self._woken = anyio.Event()
        self._delivering: set[str] = set()
        self._slots = anyio.CapacityLimiter(MAX_DELIVERING)

    def wake(self) -> None:
        """Look again now: this replica made or changed an automation, or queued a manual invocation."""
        self._woken.set()

    async def run(self, services: AgentsNeeds, release_claims: bool) -> None:
        """For the app's lifetime. `release_claims`: this process is the only one on the database (SQLite), so
        delivery claims left there are a previous process's, and are let go at once."""
        if release_claims:
            try:
                await services.automations.release_claims()
            except StorageError:  # they lapse on their own
                log.warning("automations: earlier delivery claims not let go")
        while True:
            sleep_s = POLL_S
            try:
                await self.tick(services)
                due = await services.automations.next_due()
                if due is not None:
                    sleep_s = min(POLL_S, max(due - time.time(), MIN_SLEEP_S))
            except StorageError:
                log.warning("automations: the database failed; trying again")
            with anyio.move_on_after(sleep_s):
                await self._woken.wait()
            self._woken = anyio.Event()

    async def tick(self, services: AgentsNeeds) -> None:
        store, replicas, metrics = services.automations, services.replicas, services.metrics
        for invocation in await store.awaiting(BATCH):  # first: an occurrence due now skips only a turn still running
            await self._settle(services, invocation)
        now = time.time()
        queued, skipped = await store.fire_due(now, BATCH, replicas.id, DELIVERY_LEASE_S, lambda automation: firing(automation, now))
        for invocation in queued:
            metrics.automation("fired", now - (invocation.scheduled_at or now))
        for _ in range(skipped):
            metrics.automation(InvocationStatus.SKIPPED)
        waiting = await store.claim_undelivered(replicas.id, now, DELIVERY_LEASE_S, now - replicas.lease_s, BATCH)
        for invocation in [*queued, *waiting]:
            if invocation.id not in self._delivering:
                self._delivering.add(invocation.id)
                services.supervisor.start_soon(self._deliver, services, invocation, name=f"automation invocation {invocation.id}")

    async def _deliver(self, services: AgentsNeeds, invocation: Invocation) -> None:
        store = services.automations
        try:
            async with self._slots:
                turn_id = await _delivered(services, invocation)
            if turn_id is None:
                await store.release(invocation.id)  # its session is busy: tried again on a later pass
            else:
                await store.delivered(invocation.id, turn_id)
                self.wake()
        except DeliveryFailed as exc:
            log.info("automation %s: invocation %s failed: %s", invocation.automation_id, invocation.id, exc)
            await _ended(services, invocation, InvocationStatus.FAILED, exc.error, exc.pause)
        finally:
            self._delivering.discard(invocation.id)

    async def _settle(self, services: AgentsNeeds, invocation: Invocation) -> None:
        assert invocation.session_id is not None and invocation.turn_id is not None
        turn = await services.agents.turn(invocation.session_id, invocation.turn_id)
        if turn is None:
            error = {"code": "session_not_found", "message": "The invocation's session was deleted before its turn ended."}
            await _ended(services, invocation, InvocationStatus.FAILED, error, pause=True)
            return
        status = turn.body["status"]
        if status == TurnStatus.COMPLETED:
            await _ended(services, invocation, InvocationStatus.COMPLETED, None, pause=False)
        elif status in (TurnStatus.FAILED, TurnStatus.CANCELLED):
            error = turn.body.get("error") or {"code": "turn_cancelled", "message": "The invocation's turn was cancelled."}
            await _ended(services, invocation, InvocationStatus.FAILED, error, pause=status == TurnStatus.FAILED)


async def _ended(services: AgentsNeeds, invocation: Invocation, status: InvocationStatus, error: dict[str, str] | None, pause: bool) -> None:
    """The invocation settled so (counted once: by the replica whose write settled it). `pause` pauses only
    an automation that targets an existing session: that session is what failed, and every later invocation
    would too. A new session's failure (its run failed, its replica died before the run could be adopted) is
    that invocation's alone, and the schedule goes on."""
    if pause:
        automation = await services.automations.automation(invocation.automation_id, invocation.tenant)
        pause = automation is not None and automation.body["target"]["type"] == "existing_session"
    if await services.automations.settle(invocation, status, error, pause):
        services.metrics.automation(status)


async def _delivered(services: AgentsNeeds, invocation: Invocation) -> str | None:
    """Deliver the invocation (again, after a replica died mid-way: each step is idempotent); the turn it
    started, or None while its existing session is busy."""
    automation = await services.automations.automation(invocation.automation_id, invocation.tenant)
    if automation is None:
        raise DeliveryFailed("automation_not_found", "The automation was deleted.")
    target, tenant, session_id = automation.body["target"], invocation.tenant, invocation.session_id
    assert session_id is not None
    session = await services.agents.session(session_id, tenant)
    try:
        if target["type"] == "existing_session":
            if session is None:
                raise DeliveryFailed("session_not_found", f"The target session '{session_id}' no longer exists.", pause=True)
            if session.state.status != SessionStatus.IDLE:
                return None
            await send(services, session_id, tenant, target["instructions"], invocation.id)
        else:
            kept = _Kept.model_validate({"environment": target["environment"], "input": target["input"]})
            if session is not None:  # made already, by a replica that died before it was told delivered
                await send(services, session_id, tenant, kept.input, invocation.id)
                return await _turn_of(services, session_id, tenant)
            agent_id, agent = target.get("agent_id"), target.get("agent")
            if agent is None:
                agent_id, agent = await snapshot(services, tenant, agent_id, None, "target.")
            else:
                agent_id = f"agent_{automation.id.removeprefix('auto_')}"
            vault_ids = target.get("vault_ids") or []
            body = {
                "environment": await environment(services, tenant, kept.environment, "target.environment", vault_ids),
                "metadata": target.get("metadata") or {}, "vault_ids": vault_ids, "review": "none", "prompt_cache_options": None,
            }  # fmt: skip
            record, conversation = session_record(tenant, agent_id, agent, body, session_id)
            await start(services, record, conversation, kept.input, invocation.id)
    except APIError as exc:
        raise DeliveryFailed(exc.code or "invalid_request", exc.message) from None
    return await _turn_of(services, session_id, tenant)


async def _turn_of(services: AgentsNeeds, session_id: str, tenant: str) -> str:
    delivered = await services.agents.session(session_id, tenant)
    if delivered is None or delivered.state.turn_id is None:
        raise DeliveryFailed("session_not_found", "The invocation's session was deleted as it was delivered.", pause=True)
    return delivered.state.turn_id
