"""A hosted turn's artifacts: the files it left in its environment's workspace (what its commands created or
changed under /mnt/data, which the container's file sync records), each kept as a copy of its own so that it
outlives the container, within the tenant's quota of artifact bytes."""

from __future__ import annotations

import logging
import time

from ..core.ids import new_id
from ..storage.agent_store import Artifact
from .needs import AgentsNeeds

log = logging.getLogger("gateway.agents")


async def keep_artifacts(services: AgentsNeeds, session_id: str, tenant: str, turn_id: str) -> None:
    store = services.agents
    session = await store.session(session_id, tenant)
    turn = await store.turn(session_id, turn_id)
    if session is None or turn is None or session.body["environment"]["type"] != "openai_hosted":
        return
    environment_id = session.body["environment"]["id"]  # its container's id
    kept_before = await store.artifact_paths(session_id, turn_id)  # by an earlier run of the same turn
    made = [
        file
        for file in await services.files.store.container_files(environment_id)
        if file.source == "assistant" and file.created_at >= turn.created_at and file.path not in kept_before
    ]
    now, blobs = int(time.time()), services.files.blobs
    artifacts = [
        Artifact(new_id("artifact"), session_id, tenant, turn_id, environment_id, file.path, file.bytes, now, await blobs.copy(file.blob))
        for file in made
    ]
    if not artifacts:
        return
    kept = await store.put_artifacts(artifacts, services.config.agents.max_artifact_bytes_per_tenant)
    for artifact in artifacts:
        if artifact not in kept:
            log.info("agent session %s: artifact %s not kept: the tenant's artifact quota is full", session_id, artifact.path)
            await blobs.remove(artifact.blob)
