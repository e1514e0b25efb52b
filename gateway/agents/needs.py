"""What the Agents API uses of the app: a part of gateway/services.py's `Services`. Its turns are runs of the
Responses loop, so it needs what that does, and its own store, feed and the webhook outbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from runtime.supervision import Supervisor

from ..core.requests import NeedsOf
from ..responses.loop.needs import ResponsesNeeds
from ..storage.agent_store import AgentStore
from ..storage.automation_store import AutomationStore
from ..storage.environment_store import EnvironmentStore
from ..storage.vault_store import VaultStore
from ..storage.webhook_outbox import WebhookOutbox
from ..vaults.tokens import TokenRefresher
from .feed import SessionFeed

if TYPE_CHECKING:
    from .traces import TurnSpans


class Waker(Protocol):
    def wake(self) -> None:
        """Look again now: an automation was made or changed, or a manual invocation queued."""


class AgentsNeeds(ResponsesNeeds, Protocol):
    agents: AgentStore
    agent_spans: "TurnSpans | None"  # with tracing on: turns' traces (traces.py)
    agent_environments: EnvironmentStore  # hosted environments (by their container's id)
    agent_templates: EnvironmentStore  # environment templates
    agent_feed: SessionFeed
    automations: AutomationStore
    vaults: VaultStore  # the credentials a session's vaults hold
    token_refresher: TokenRefresher
    webhook_outbox: WebhookOutbox  # session state changes queue their webhooks in the same transaction
    supervisor: Supervisor

    @property
    def scheduler(self) -> Waker:
        """This replica's automations scheduler (scheduler.py)."""


needs_of = NeedsOf[AgentsNeeds]()
