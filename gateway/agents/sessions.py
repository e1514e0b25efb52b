"""A new session: its agent's snapshot, its environment, its conversation, and its first turn when input came.
Made by `POST /v1/agents/sessions` and by automations (each invocation of a `new_session` target)."""

from __future__ import annotations

import time
from typing import Any

from ..core.ids import new_id
from ..errors import bad_request
from ..storage import Tx
from ..storage.agent_store import SessionRecord, SessionState
from ..storage.conversation_store import Conversation
from ..storage.file_store import TooMany
from .environments import provision, session_environment
from .models import AgentConfig, Environment, HostedEnvironment, InputMessage, MessageInput, SelfHostedEnvironment
from .needs import AgentsNeeds
from .objects import no_agent, resolved_agent, session_object, unsupported
from .session_state import Emitted
from .translate import event
from .turns import Turns


async def snapshot(
    services: AgentsNeeds, tenant: str, agent_id: str | None, agent: AgentConfig | None, param: str = ""
) -> tuple[str, dict[str, Any]]:
    """The agent a session runs (its id and body): the kept one `agent_id` names as it is now, or the inline
    one resolved (its credentials sealed)."""
    if (agent is None) == (agent_id is None):
        raise bad_request("Give exactly one of agent (inline) and agent_id.", param=f"{param}agent_id")
    if agent_id is not None:
        stored = await services.agents.agent(agent_id, tenant)
        if stored is None:
            raise no_agent(agent_id, f"{param}agent_id")
        return stored.id, stored.body
    assert agent is not None
    services.engines.route(agent.model)
    return new_id("agent"), resolved_agent(agent, services.sealer, tenant)


async def environment(
    services: AgentsNeeds, tenant: str, asked: Environment, param: str = "environment", vault_ids: list[str] | None = None
) -> dict[str, Any]:
    """The session's environment: none, or a hosted one (one of the gateway's containers: environments.py)."""
    if isinstance(asked, SelfHostedEnvironment):
        raise unsupported("A self_hosted environment (codex exec-server)", f"{param}.type")
    if isinstance(asked, HostedEnvironment):
        return session_environment(await provision(services, tenant, asked, param, vault_ids))
    return {"type": "none"}


def session_record(
    tenant: str, agent_id: str, agent: dict[str, Any], body: dict[str, Any], session_id: str | None = None
) -> tuple[SessionRecord, Conversation]:
    """A session (and its conversation) not kept yet; `body` its environment, metadata, review and cache options."""
    now = int(time.time())
    conversation = Conversation(new_id("conv"), now, {}, tenant)
    record = SessionRecord(session_id or new_id("sess"), tenant, agent_id, conversation.id, now, now, {"agent": agent, **body}, SessionState())
    return record, conversation


async def start(
    services: AgentsNeeds, record: SessionRecord, conversation: Conversation, given: str | list[InputMessage] | None, key: str | None = None
) -> None:
    """Keep the session (and its conversation), tell it was created, and start its first turn if input came
    (sent with `key`, at most once)."""
    tenant = record.tenant
    await services.conversations.create(conversation, [])
    try:
        await services.agents.create_session(record, services.config.agents.max_sessions_per_tenant)
    except TooMany as exc:
        await services.conversations.delete(conversation.id, tenant)
        raise bad_request(f"This gateway keeps at most {exc.limit} agent sessions per project.", code="too_many_sessions") from None
    await _announce(services, record)
    if given:
        await send(services, record.id, tenant, given, key)


async def send(services: AgentsNeeds, session_id: str, tenant: str, given: str | list[InputMessage], key: str | None) -> bool:
    """User input to the session, as `agent.session.input.message` (False: no such session)."""
    messages = [{"role": "user", "content": [{"type": "input_text", "text": given}]}] if isinstance(given, str) else given
    message = MessageInput.model_validate({"type": "agent.session.input.message", "input": messages})
    return await Turns(services).submit(session_id, tenant, [message], key)


async def _announce(services: AgentsNeeds, record: SessionRecord) -> None:
    """`agent.session.created`: in the session's log (for the stream that created it) and as a webhook."""

    async def work(tx: Tx, session: SessionRecord) -> Emitted:
        emitted = Emitted()
        emitted.events.append(event("agent.session.created", session=session_object(session)))
        emitted.webhook = "agent.session.created"
        return emitted

    await Turns(services).change(record.id, record.tenant, work)
