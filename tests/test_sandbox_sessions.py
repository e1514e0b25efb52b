"""The python sessions' directory: one holder at a time, taken over only between executions (or from a
replica that is gone), never across tenants."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from gateway.config import StorageConfig
from gateway.replicas import Replicas
from gateway.sandbox_sessions import SessionDirectory
from gateway.storage import open_database
from gateway.storage.response_store import ResponseStore
from sandbox.directory import SessionBusy, SessionNotFound, SessionTaken


def test_a_session_has_one_holder_and_changes_hands_between_executions(tmp_path: Path) -> None:
    async def check() -> None:
        db = open_database(f"sqlite:///{tmp_path}/directory.sqlite3", retry_s=1, pool_size=1)
        await db.start()
        directories = {}
        for name in ("a", "b"):
            replicas = Replicas(db, ResponseStore(db), StorageConfig(lease_s=5, replica_id=name))
            await replicas.join()
            directories[name] = SessionDirectory(db, replicas)
        a, b = directories["a"], directories["b"]
        taken: list[tuple[str, str]] = []
        a.on_taken(lambda session, owner: taken.append((session, owner)))

        assert await a.acquire("cntr_1", "t1", busy_s=30) is None  # no such session yet
        assert await a.register("cntr_1", "t1", "container-1", busy_s=30) == 1
        with pytest.raises(SessionTaken):
            await b.register("cntr_1", "t1", "container-2", busy_s=30)
        with pytest.raises(SessionBusy):  # running code on a live replica
            await b.acquire("cntr_1", "t1", busy_s=30)
        with pytest.raises(SessionNotFound):  # another tenant's is not found, busy or not
            await b.acquire("cntr_1", "t2", busy_s=30)

        await a.release("cntr_1", "container-1")
        placement = await b.acquire("cntr_1", "t1", busy_s=30)
        assert placement is not None and (placement.container, placement.owner, placement.generation) == ("container-1", "b", 2)
        assert taken == [("cntr_1", "b")]  # the previous holder is told
        assert not await a.forget("cntr_1")  # no longer a's to remove
        again = await b.acquire("cntr_1", "t1", busy_s=30)  # the holder's own next call: same generation
        assert again is not None and again.generation == 2

        # b dies while running code: its busy mark does not hold the session once its lease ran out.
        await db.execute("UPDATE replicas SET heartbeat_at = ? WHERE id = 'b'", time.time() - 60)
        adopted = await a.acquire("cntr_1", "t1", busy_s=30)
        assert adopted is not None and (adopted.owner, adopted.generation) == ("a", 3)
        assert set(await a.placements()) == {"container-1"}
        assert await a.forget("cntr_1") and await a.placements() == {}
        await db.close()

    anyio.run(check)
