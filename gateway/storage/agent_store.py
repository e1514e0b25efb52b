"""The Agents API's records (gateway/agents/): agents, sessions with their state, turns, the items their turns
made, the session's event log that every subscriber reads, and the input events' idempotency keys. Another
tenant's record is as absent as one that never existed.

A session's state changes in a transaction that locks its row (`change`), so that two replicas given the
same session's input (a tool result here, the turn's end there) never both act on what they read."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from . import Database, Tx
from .file_store import TooMany
from .paging import PageQuery, fetch_page

T = TypeVar("T")

CHANNEL = "agent_sessions"  # notified with a session's id whenever its event log grows


@dataclass
class AgentRecord:
    id: str
    tenant: str
    created_at: int
    updated_at: int
    body: dict[str, Any]  # the Agent object less id, created_at and updated_at (secrets sealed)


@dataclass
class SessionState:
    """What changes as a session runs."""

    status: str = "idle"  # idle | in_progress | requires_action | failed
    turn_id: str | None = None  # the turn running or waiting, or the last one
    response_id: str | None = None  # the turn's run going on now, or its last
    runner: str | None = None  # the replica following that run (translating its events into the log)
    followed: int = -1  # the last of the run's events its follower wrote: where a follower taking over goes on
    run_base: int = 0  # the turn's output index the run's first item has
    required_actions: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # call/request id -> the input it gave
    steers: list[dict[str, Any]] = field(default_factory=list)  # messages waiting for the run to end at a boundary
    given: list[dict[str, Any]] = field(default_factory=list)  # results of the gateway's own tools' calls, for the next run
    pending: list[dict[str, Any]] | None = None  # the input of a run its runner is starting (another starts it if that one dies)
    output_index: int = 0  # where the turn's next run's items go on
    usage: dict[str, Any] | None = None  # the session's, all its turns'
    turn_usage: dict[str, Any] | None = None  # the turn's, all its runs'
    error: str | None = None

    def as_json(self) -> str:
        return json.dumps(self.__dict__)


@dataclass
class SessionRecord:
    id: str
    tenant: str
    agent_id: str
    conversation_id: str
    created_at: int
    last_active_at: int
    body: dict[str, Any]  # agent snapshot, environment, metadata, vault_ids, review, prompt_cache_options
    state: SessionState
    body_changed: bool = False  # set by a change that changed the body: only then is it written again


@dataclass
class TurnRecord:
    id: str
    session_id: str
    tenant: str
    created_at: int
    body: dict[str, Any]  # the Turn object


@dataclass
class Artifact:
    id: str
    session_id: str
    tenant: str
    turn_id: str
    environment_id: str
    path: str
    size_bytes: int
    created_at: int
    blob: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "agent.session.artifact", "session_id": self.session_id, "turn_id": self.turn_id,
            "environment_id": self.environment_id, "path": self.path, "size_bytes": self.size_bytes, "created_at": self.created_at,
        }  # fmt: skip


_ARTIFACT = "id, session_id, tenant, turn_id, environment_id, path, size_bytes, created_at, blob"
_AGENT = "id, tenant, created_at, updated_at, body"
_SESSION = "id, tenant, agent_id, conversation_id, created_at, last_active_at, body, state"
_TURN = "id, session_id, tenant, created_at, body"


def _agent(row: Any) -> AgentRecord:
    return AgentRecord(row[0], row[1], int(row[2]), int(row[3]), json.loads(row[4]))


def _session(row: Any) -> SessionRecord:
    return SessionRecord(row[0], row[1], row[2], row[3], int(row[4]), int(row[5]), json.loads(row[6]), SessionState(**json.loads(row[7])))


def _turn(row: Any) -> TurnRecord:
    return TurnRecord(row[0], row[1], row[2], int(row[3]), json.loads(row[4]))


class AgentStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # Agents

    async def create_agent(self, agent: AgentRecord, max_agents: int) -> None:
        async def work(tx: Tx) -> None:
            await tx.lock(f"agents:{agent.tenant}")
            rows = await tx.fetch("SELECT COUNT(*) FROM agents WHERE tenant = ?", agent.tenant)
            if int(rows[0][0]) >= max_agents:
                raise TooMany("agents", max_agents)
            await tx.execute(
                f"INSERT INTO agents ({_AGENT}) VALUES (?,?,?,?,?)",
                agent.id,
                agent.tenant,
                agent.created_at,
                agent.updated_at,
                json.dumps(agent.body),
            )

        await self.db.transaction(work)

    async def agent(self, agent_id: str, tenant: str) -> AgentRecord | None:
        rows = await self.db.fetch(f"SELECT {_AGENT} FROM agents WHERE id = ? AND tenant = ?", agent_id, tenant)
        return _agent(rows[0]) if rows else None

    async def agents(self, tenant: str, page: PageQuery) -> tuple[list[AgentRecord], bool] | None:
        rows = await fetch_page(self.db, "agents", _AGENT, "tenant = ?", [tenant], page)
        return None if rows is None else ([_agent(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def update_agent(self, agent_id: str, tenant: str, body: dict[str, Any]) -> AgentRecord | None:
        """The agent with its body replaced; `updated_at` (its version) moves on, never back."""

        async def work(tx: Tx) -> AgentRecord | None:
            rows = await tx.fetch(f"SELECT {_AGENT} FROM agents WHERE id = ? AND tenant = ?{self.db.for_update()}", agent_id, tenant)
            if not rows:
                return None
            before = _agent(rows[0])
            updated = max(int(time.time()), before.updated_at + 1) if body != before.body else before.updated_at
            await tx.execute("UPDATE agents SET body = ?, updated_at = ? WHERE id = ?", json.dumps(body), updated, agent_id)
            return AgentRecord(agent_id, tenant, before.created_at, updated, body)

        return await self.db.transaction(work)

    async def delete_agent(self, agent_id: str, tenant: str) -> bool:
        return bool(await self.db.execute("DELETE FROM agents WHERE id = ? AND tenant = ?", agent_id, tenant))

    # Sessions

    async def create_session(self, session: SessionRecord, max_sessions: int) -> None:
        async def work(tx: Tx) -> None:
            await tx.lock(f"agent_sessions:{session.tenant}")
            rows = await tx.fetch("SELECT COUNT(*) FROM agent_sessions WHERE tenant = ?", session.tenant)
            if int(rows[0][0]) >= max_sessions:
                raise TooMany("agent sessions", max_sessions)
            await tx.execute(
                f"INSERT INTO agent_sessions ({_SESSION}, status) VALUES (?,?,?,?,?,?,?,?,?)",
                session.id, session.tenant, session.agent_id, session.conversation_id, session.created_at,
                session.last_active_at, json.dumps(session.body), session.state.as_json(), session.state.status,
            )  # fmt: skip

        await self.db.transaction(work)

    async def session(self, session_id: str, tenant: str) -> SessionRecord | None:
        rows = await self.db.fetch(f"SELECT {_SESSION} FROM agent_sessions WHERE id = ? AND tenant = ?", session_id, tenant)
        return _session(rows[0]) if rows else None

    async def sessions(self, tenant: str, agent_id: str | None, page: PageQuery) -> tuple[list[SessionRecord], bool] | None:
        where, params = "tenant = ?", [tenant]
        if agent_id is not None:
            where, params = where + " AND agent_id = ?", params + [agent_id]
        rows = await fetch_page(self.db, "agent_sessions", _SESSION, where, params, page)
        return None if rows is None else ([_session(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def running_sessions(self, tx: Tx, tenant: str) -> int:
        rows = await tx.fetch("SELECT COUNT(*) FROM agent_sessions WHERE tenant = ? AND status = 'in_progress'", tenant)
        return int(rows[0][0])

    async def running(self) -> list[tuple[str, str, SessionState]]:
        """Every session whose turn runs: id, tenant, state (a bounded number: each tenant's cap)."""
        rows = await self.db.fetch("SELECT id, tenant, state FROM agent_sessions WHERE status = 'in_progress'")
        return [(row[0], row[1], SessionState(**json.loads(row[2]))) for row in rows]

    async def change(self, session_id: str, tenant: str, work: Callable[[Tx, SessionRecord], Awaitable[T]]) -> T | None:
        """`work(tx, session)` with the session's row locked; what it leaves in its `state` is written back, and
        its `body` where it says it changed it. None when there is no such session."""

        async def locked(tx: Tx) -> T | None:
            rows = await tx.fetch(f"SELECT {_SESSION} FROM agent_sessions WHERE id = ? AND tenant = ?{self.db.for_update()}", session_id, tenant)
            if not rows:
                return None
            session = _session(rows[0])
            result = await work(tx, session)
            if session.body_changed:  # the agent's snapshot may be large: not written again with every event
                await tx.execute("UPDATE agent_sessions SET body = ? WHERE id = ?", json.dumps(session.body), session_id)
            await tx.execute(
                "UPDATE agent_sessions SET state = ?, status = ?, last_active_at = ? WHERE id = ?",
                session.state.as_json(), session.state.status, int(time.time()), session_id,
            )  # fmt: skip
            return result

        return await self.db.transaction(locked)

    async def delete_session(self, session_id: str, tenant: str) -> tuple[SessionRecord, list[str]] | None:
        """The session gone with everything of it; its artifacts' blobs, for the caller to remove."""

        async def work(tx: Tx) -> tuple[SessionRecord, list[str]] | None:
            rows = await tx.fetch(f"SELECT {_SESSION} FROM agent_sessions WHERE id = ? AND tenant = ?", session_id, tenant)
            if not rows:
                return None
            blobs = [row[0] for row in await tx.fetch("SELECT blob FROM agent_artifacts WHERE session_id = ?", session_id)]
            for table in ("agent_session_events", "agent_items", "agent_turns", "agent_input_keys", "agent_artifacts", "agent_traces"):
                await tx.execute(f"DELETE FROM {table} WHERE session_id = ?", session_id)
            await tx.execute("DELETE FROM agent_sessions WHERE id = ?", session_id)
            return _session(rows[0]), blobs

        return await self.db.transaction(work)

    # Turns and items (written within `change`)

    async def put_turn(self, tx: Tx, turn: TurnRecord) -> None:
        await tx.execute(
            "INSERT INTO agent_turns (id, session_id, tenant, created_at, body) VALUES (?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET body = excluded.body",
            turn.id, turn.session_id, turn.tenant, turn.created_at, json.dumps(turn.body),
        )  # fmt: skip

    async def turn(self, session_id: str, turn_id: str, tx: Tx | None = None) -> TurnRecord | None:
        rows = await (tx or self.db).fetch(f"SELECT {_TURN} FROM agent_turns WHERE id = ? AND session_id = ?", turn_id, session_id)
        return _turn(rows[0]) if rows else None

    async def turns(self, session_id: str, page: PageQuery) -> tuple[list[TurnRecord], bool] | None:
        rows = await fetch_page(self.db, "agent_turns", _TURN, "session_id = ?", [session_id], page)
        return None if rows is None else ([_turn(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def put_items(self, tx: Tx, session_id: str, items: list[dict[str, Any]]) -> None:
        """Items made or finished: each kept once, by id, in the order first put."""
        for item in items:
            await tx.execute(
                "INSERT INTO agent_items (session_id, id, turn_id, created_at, item) VALUES (?,?,?,?,?) "
                "ON CONFLICT (session_id, id) DO UPDATE SET item = excluded.item",
                session_id, item["id"], item["turn_id"], time.time(), json.dumps(item),
            )  # fmt: skip

    async def turn_items(self, tx: Tx, session_id: str, turn_id: str) -> list[dict[str, Any]]:
        rows = await tx.fetch("SELECT item FROM agent_items WHERE session_id = ? AND turn_id = ? ORDER BY created_at", session_id, turn_id)
        return [json.loads(row[0]) for row in rows]

    async def items(self, session_id: str, turn_id: str | None, page: PageQuery) -> tuple[list[dict[str, Any]], bool] | None:
        where, params = "session_id = ?", [session_id]
        if turn_id is not None:
            where, params = where + " AND turn_id = ?", params + [turn_id]
        rows = await fetch_page(self.db, "agent_items", "item", where, params, page)
        return None if rows is None else ([json.loads(row[0]) for row in rows[: page.limit]], len(rows) > page.limit)

    # The event log

    async def append(self, tx: Tx, session_id: str, frames: list[bytes]) -> int:
        """Within the session's `change`: its next events; the first one's number. Readers are told once the
        transaction commits."""
        rows = await tx.fetch("SELECT COALESCE(MAX(seq), -1) FROM agent_session_events WHERE session_id = ?", session_id)
        first, now = int(rows[0][0]) + 1, time.time()
        await tx.executemany(
            "INSERT INTO agent_session_events (session_id, seq, created_at, frame) VALUES (?,?,?,?)",
            [(session_id, first + offset, now, frame) for offset, frame in enumerate(frames)],
        )
        return first

    async def last_event(self, session_id: str) -> int:
        rows = await self.db.fetch("SELECT COALESCE(MAX(seq), -1) FROM agent_session_events WHERE session_id = ?", session_id)
        return int(rows[0][0])

    async def events_after(self, session_id: str, after: int, limit: int = 512) -> list[tuple[int, bytes]]:
        rows = await self.db.fetch(
            "SELECT seq, frame FROM agent_session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?", session_id, after, limit
        )
        return [(int(seq), bytes(frame)) for seq, frame in rows]

    async def forget_events(self, tx: Tx, session_id: str, before: float) -> None:
        """The log is live only (nobody reads it back from a position): what is older than a reader's lag goes."""
        await tx.execute("DELETE FROM agent_session_events WHERE session_id = ? AND created_at < ?", session_id, before)

    async def published(self, session_id: str) -> None:
        await self.db.notify(CHANNEL, session_id)

    # Artifacts

    async def put_artifacts(self, artifacts: list[Artifact], quota_bytes: int) -> list[Artifact]:
        """Keep the artifacts the tenant's quota has room for, in order; those kept."""
        if not artifacts:
            return []

        async def work(tx: Tx) -> list[Artifact]:
            tenant = artifacts[0].tenant
            await tx.lock(f"agent_artifacts:{tenant}")
            rows = await tx.fetch("SELECT COALESCE(SUM(size_bytes), 0) FROM agent_artifacts WHERE tenant = ?", tenant)
            used, kept = int(rows[0][0]), []
            for artifact in artifacts:
                if used + artifact.size_bytes > quota_bytes:
                    continue
                used += artifact.size_bytes
                kept.append(artifact)
                await tx.execute(
                    f"INSERT INTO agent_artifacts ({_ARTIFACT}) VALUES (?,?,?,?,?,?,?,?,?)",
                    artifact.id, artifact.session_id, artifact.tenant, artifact.turn_id, artifact.environment_id, artifact.path,
                    artifact.size_bytes, artifact.created_at, artifact.blob,
                )  # fmt: skip
            return kept

        return await self.db.transaction(work)

    async def artifact_paths(self, session_id: str, turn_id: str) -> set[str]:
        rows = await self.db.fetch("SELECT path FROM agent_artifacts WHERE session_id = ? AND turn_id = ?", session_id, turn_id)
        return {row[0] for row in rows}

    async def artifact(self, session_id: str, artifact_id: str) -> Artifact | None:
        rows = await self.db.fetch(f"SELECT {_ARTIFACT} FROM agent_artifacts WHERE id = ? AND session_id = ?", artifact_id, session_id)
        return Artifact(*rows[0]) if rows else None

    async def artifacts(self, session_id: str, page: PageQuery) -> tuple[list[Artifact], bool] | None:
        rows = await fetch_page(self.db, "agent_artifacts", _ARTIFACT, "session_id = ?", [session_id], page)
        return None if rows is None else ([Artifact(*row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def delete_artifact(self, session_id: str, artifact_id: str) -> Artifact | None:
        found = await self.artifact(session_id, artifact_id)
        if found is not None and await self.db.execute("DELETE FROM agent_artifacts WHERE id = ?", artifact_id):
            return found
        return None

    # Traces

    async def put_trace(self, session_id: str, trace_id: str, turn_id: str, otlp: dict[str, Any]) -> None:
        await self.db.execute(
            "INSERT INTO agent_traces (id, session_id, turn_id, created_at, otlp) VALUES (?,?,?,?,?)",
            trace_id, session_id, turn_id, int(time.time()), json.dumps(otlp),
        )  # fmt: skip

    async def traces(self, session_id: str, page: PageQuery) -> tuple[list[dict[str, Any]], bool] | None:
        rows = await fetch_page(self.db, "agent_traces", "id, created_at, otlp", "session_id = ?", [session_id], page)
        if rows is None:
            return None
        shown = [
            {"id": row[0], "object": "agent.session.trace", "session_id": session_id, "created_at": int(row[1]), "otlp": json.loads(row[2])}
            for row in rows[: page.limit]
        ]
        return shown, len(rows) > page.limit

    # Idempotency keys of input events

    async def first_use(self, tx: Tx, session_id: str, key: str) -> bool:
        """Within the session's `change`: whether this key is new for the session (and now taken)."""
        rows = await tx.fetch("SELECT 1 FROM agent_input_keys WHERE session_id = ? AND key = ?", session_id, key)
        if rows:
            return False
        await tx.execute("INSERT INTO agent_input_keys (session_id, key, created_at) VALUES (?,?,?)", session_id, key, time.time())
        return True
