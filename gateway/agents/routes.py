"""OpenAI's Agents API (beta, `OpenAI-Beta: agents=v1`): agents, sessions, their input and event stream,
turns and items. A door like the others: a session's turn is a background run of the Responses loop
(turns.py), its events a translation of that run's (translate.py), read by every subscriber from the
session's log (feed.py)."""

from __future__ import annotations

import time
from typing import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.ids import new_id
from ..core.requests import metadata_query, refuse_while_draining, tenant_of
from ..errors import APIError, bad_request, not_found
from ..files.routes import download
from ..jsontext import JSONResponse
from ..protocol import SessionStatus
from ..responses.routes import sse_response
from ..storage import Tx
from ..storage.agent_store import AgentRecord, Artifact, SessionRecord, TurnRecord
from ..storage.file_store import TooMany
from ..storage.paging import listing, page_of, page_query, page_shown, unknown_after
from ..web.body import parse_body
from .feed import Subscription
from .models import (
    AgentConfig,
    AgentUpdate,
    InputEvents,
    SessionCreate,
    SessionUpdate,
)
from .needs import needs_of
from .objects import agent_object, no_agent, persisted_tools, resolved_agent, session_object, shown
from .session_state import Emitted
from .sessions import environment, session_record, snapshot, start
from .turns import Turns
from .vault_use import checked_vaults

# The events after which a stream that submitted a turn's input (`sessions.create(stream=True, input=…)`) ends.
_ENDS = (b"event: agent.session.idle\n", b"event: agent.session.failed\n")


# Agents


async def create_agent(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, AgentConfig, services.config.server.body_limits())
    tenant = tenant_of(request)
    services.engines.route(body.model)  # a model this gateway serves, or the 404 naming it
    now = int(time.time())
    record = AgentRecord(new_id("agent"), tenant, now, now, resolved_agent(body, services.sealer, tenant))
    try:
        await services.agents.create_agent(record, services.config.agents.max_agents_per_tenant)
    except TooMany as exc:
        raise bad_request(f"This gateway keeps at most {exc.limit} agents per project.", code="too_many_agents") from None
    return JSONResponse(agent_object(record))


async def list_agents(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    return JSONResponse(page_shown(await services.agents.agents(tenant_of(request), query), query, agent_object))


async def retrieve_agent(request: Request) -> Response:
    return JSONResponse(agent_object(await _agent(request)))


async def update_agent(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, AgentUpdate, services.config.server.body_limits())
    record, tenant = await _agent(request), tenant_of(request)
    given = body.model_dump(exclude_unset=True, by_alias=True)
    if body.model is not None:
        services.engines.route(body.model)
    config = AgentConfig.model_validate({**_config_of(record.body), **given})
    resolved = resolved_agent(config, services.sealer, tenant)
    if "tools" not in given:  # kept as they were, their sealed credentials with them
        resolved["tools"], resolved["_secrets"] = record.body["tools"], record.body.get("_secrets", {})
    updated = await services.agents.update_agent(record.id, tenant, resolved)
    if updated is None:
        raise no_agent(record.id)
    return JSONResponse(agent_object(updated))


def _config_of(body: dict[str, object]) -> dict[str, object]:
    """The fields an update starts from (tools apart: re-validating them would need their sealed secrets)."""
    return {
        key: value for key, value in shown(body).items() if key in ("model", "name", "instructions", "metadata", "reasoning", "text", "service_tier")
    }


async def delete_agent(request: Request) -> Response:
    services, agent_id = needs_of(request), request.path_params["agent_id"]
    if not await services.agents.delete_agent(agent_id, tenant_of(request)):
        raise no_agent(agent_id)
    return JSONResponse({"id": agent_id, "object": "agent.deleted", "deleted": True})


async def _agent(request: Request) -> AgentRecord:
    agent_id = request.path_params["agent_id"]
    record = await needs_of(request).agents.agent(agent_id, tenant_of(request))
    if record is None:
        raise no_agent(agent_id)
    return record


# Sessions


async def create_session(request: Request) -> Response:
    services = needs_of(request)
    refuse_while_draining(services.drain)
    body = await parse_body(request, SessionCreate, services.config.server.body_limits())
    tenant = tenant_of(request)
    vault_ids = await checked_vaults(services, tenant, body.vault_ids)
    agent_id, agent = await snapshot(services, tenant, body.agent_id, body.agent)
    record, conversation = session_record(tenant, agent_id, agent, {
        "environment": await environment(services, tenant, body.environment, vault_ids=vault_ids), "metadata": body.metadata or {},
        "vault_ids": vault_ids,
        "review": body.review or "none", "prompt_cache_options": body.prompt_cache_options.model_dump() if body.prompt_cache_options else None,
    })  # fmt: skip
    frames = await services.agent_feed.subscribe(record.id) if body.stream else None
    try:
        await start(services, record, conversation, body.input)
    except BaseException:
        if frames is not None:
            frames.close()
        raise
    if frames is None:
        return JSONResponse(session_object(await _session(request, record.id)))
    return sse_response(services, _until_turn_ends(frames) if body.input else _first(frames))


async def _until_turn_ends(frames: Subscription) -> AsyncIterator[bytes]:
    ended = False
    async for chunk in frames:
        yield chunk
        ended = ended or b"event: agent.session.turn.completed\n" in chunk or b"event: agent.session.turn.failed\n" in chunk
        ended = ended or b"event: agent.session.turn.cancelled\n" in chunk
        if ended and any(end in chunk for end in _ENDS):
            return


async def _first(frames: Subscription) -> AsyncIterator[bytes]:
    async for chunk in frames:
        yield chunk
        return


async def list_sessions(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    metadata = metadata_query(request)
    found = await services.agents.sessions(tenant_of(request), request.query_params.get("agent_id"), query)
    if found is None:
        raise unknown_after(query.after or "")
    sessions, more = found
    shown_sessions = [session_object(session) for session in sessions if all(session.body["metadata"].get(k) == v for k, v in metadata.items())]
    return JSONResponse(listing(shown_sessions, more))


async def retrieve_session(request: Request) -> Response:
    return JSONResponse(session_object(await _session(request)))


async def update_session(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, SessionUpdate, services.config.server.body_limits())
    tenant = tenant_of(request)
    if body.agent is not None and body.agent.model is not None:
        services.engines.route(body.agent.model)
    tools = persisted_tools(body.agent.tools, services.sealer, tenant) if body.agent is not None and body.agent.tools is not None else None

    async def work(tx: Tx, session: SessionRecord) -> Emitted:
        if body.metadata is not None:
            session.body["metadata"] = body.metadata
        if body.review is not None:
            session.body["review"] = body.review
        if body.prompt_cache_options is not None:
            session.body["prompt_cache_options"] = body.prompt_cache_options.model_dump()
        agent, change = session.body["agent"], body.agent
        if change is not None:  # the session's snapshot changes; its next run takes it
            if change.model is not None:
                agent["model"] = change.model
            if change.reasoning is not None:
                agent["reasoning"] = {**agent["reasoning"], "effort": change.reasoning.effort}
            if change.service_tier is not None:
                agent["service_tier"] = change.service_tier
            if tools is not None:
                agent["tools"], agent["_secrets"] = tools
        session.body_changed = True
        return Emitted()

    session_id = request.path_params["session_id"]
    if await Turns(services).change(session_id, tenant, work) is None:
        raise _no_session(session_id)
    return JSONResponse(session_object(await _session(request)))


async def delete_session(request: Request) -> Response:
    services, session_id, tenant = needs_of(request), request.path_params["session_id"], tenant_of(request)
    session = await services.agents.session(session_id, tenant)
    if session is None:
        raise _no_session(session_id)
    if session.state.status == SessionStatus.IN_PROGRESS and session.state.response_id is not None:
        await Turns(services).stop(session.state.response_id, tenant)
    deleted = await services.agents.delete_session(session_id, tenant)
    for blob in deleted[1] if deleted is not None else []:
        await services.files.blobs.remove(blob)
    await services.conversations.delete(session.conversation_id, tenant)
    return JSONResponse({"id": session_id, "object": "agent.session.deleted", "deleted": True})


async def _session(request: Request, session_id: str | None = None) -> SessionRecord:
    session_id = session_id or request.path_params["session_id"]
    record = await needs_of(request).agents.session(session_id, tenant_of(request))
    if record is None:
        raise _no_session(session_id)
    return record


def _no_session(session_id: str) -> APIError:
    return not_found(f"No session found with id '{session_id}'.", param="session_id")


# Input, events, turns, items


async def create_events(request: Request) -> Response:
    services = needs_of(request)
    refuse_while_draining(services.drain)
    body = await parse_body(request, InputEvents, services.config.server.body_limits())
    key = request.headers.get("idempotency-key")
    if key is not None and not 0 < len(key) <= 256:
        raise bad_request("Idempotency-Key must be 1 to 256 characters.", param="Idempotency-Key")
    session_id = request.path_params["session_id"]
    if not await Turns(services).submit(session_id, tenant_of(request), body.events, key):  # the session looked up as it changes
        raise _no_session(session_id)
    return Response(status_code=204)


async def stream_events(request: Request) -> Response:
    services = needs_of(request)
    session = await _session(request)
    return sse_response(services, aiter(await services.agent_feed.subscribe(session.id)))


async def list_turns(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    session = await _session(request)
    return JSONResponse(page_shown(await services.agents.turns(session.id, query), query, lambda turn: turn.body))


async def retrieve_turn(request: Request) -> Response:
    return JSONResponse((await _turn(request, request.path_params["turn_id"])).body)


async def list_items(request: Request) -> Response:
    """The session's items, or (under `…/turns/{turn_id}`) one turn's."""
    services, query = needs_of(request), page_query(request)
    turn_id = request.path_params.get("turn_id")
    session_id = (await _turn(request, turn_id)).session_id if turn_id is not None else (await _session(request)).id
    return JSONResponse(page_shown(await services.agents.items(session_id, turn_id, query), query, dict))


async def _turn(request: Request, turn_id: str) -> TurnRecord:
    """The turn of the tenant's session the path names."""
    session = await _session(request)
    turn = await needs_of(request).agents.turn(session.id, turn_id)
    if turn is None:
        raise not_found(f"No turn found with id '{turn_id}'.", param="turn_id")
    return turn


async def list_traces(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    session = await _session(request)
    return JSONResponse(page_shown(await services.agents.traces(session.id, query), query, dict))


async def list_artifacts(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    session = await _session(request)
    return JSONResponse(page_of(await services.agents.artifacts(session.id, query), query))


async def _artifact(request: Request) -> Artifact:
    session = await _session(request)
    artifact_id = request.path_params["artifact_id"]
    found = await needs_of(request).agents.artifact(session.id, artifact_id)
    if found is None:
        raise not_found(f"No artifact found with id '{artifact_id}'.", param="artifact_id")
    return found


async def retrieve_artifact(request: Request) -> Response:
    return JSONResponse((await _artifact(request)).as_dict())


async def artifact_content(request: Request) -> Response:
    found = await _artifact(request)
    return await download(needs_of(request).files, found.blob, found.path.rsplit("/", 1)[-1])


async def delete_artifact(request: Request) -> Response:
    services, found = needs_of(request), await _artifact(request)
    if await services.agents.delete_artifact(found.session_id, found.id) is not None:
        await services.files.blobs.remove(found.blob)
    return JSONResponse({"id": found.id, "object": "agent.session.artifact.deleted", "deleted": True})


routes = [
    Route("/v1/agents/sessions/{session_id}/traces", list_traces, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/artifacts", list_artifacts, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/artifacts/{artifact_id}", retrieve_artifact, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/artifacts/{artifact_id}", delete_artifact, methods=["DELETE"]),
    Route("/v1/agents/sessions/{session_id}/artifacts/{artifact_id}/content", artifact_content, methods=["GET"]),
    Route("/v1/agents/sessions", create_session, methods=["POST"]),
    Route("/v1/agents/sessions", list_sessions, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}", retrieve_session, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}", update_session, methods=["POST"]),
    Route("/v1/agents/sessions/{session_id}", delete_session, methods=["DELETE"]),
    Route("/v1/agents/sessions/{session_id}/events", create_events, methods=["POST"]),
    Route("/v1/agents/sessions/{session_id}/events", stream_events, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/turns", list_turns, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/turns/{turn_id}", retrieve_turn, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/turns/{turn_id}/items", list_items, methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/items", list_items, methods=["GET"]),
    Route("/v1/agents", create_agent, methods=["POST"]),
    Route("/v1/agents", list_agents, methods=["GET"]),
    Route("/v1/agents/{agent_id}", retrieve_agent, methods=["GET"]),
    Route("/v1/agents/{agent_id}", update_agent, methods=["POST"]),
    Route("/v1/agents/{agent_id}", delete_agent, methods=["DELETE"]),
]
