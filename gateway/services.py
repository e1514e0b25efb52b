"""What the app is made of: made once at start-up (app.py), shared by every route and run.

This is the composition root, above every package: each package names only the part it uses, as a
`Protocol` of its own (its `needs.py`), which `Services` satisfies (`serve_every_package`, checked by the
type checker); none of them imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from connectors.browser import BrowserBackends
from connectors.servers import MCPServers
from runtime.supervision import Supervisor
from sandbox.manager import SandboxManager

from .agents.feed import SessionFeed
from .agents.needs import AgentsNeeds
from .agents.scheduler import Scheduler
from .config import GatewayConfig
from .conversations.needs import ConversationsNeeds
from .core.runs import Runs
from .core.sealed import Sealer
from .core.tenant_sockets import TenantSockets
from .engine.renderer import PromptRenderer
from .engine.routing import Engines
from .files.needs import FilesNeeds
from .files.service import FileService
from .metrics import Metrics
from .replicas import Replicas
from .responses.loop.needs import ResponsesNeeds
from .shutdown import Drain
from .skills.needs import SkillsNeeds
from .skills.service import SkillService
from .storage.agent_store import AgentStore
from .storage.automation_store import AutomationStore
from .storage.conversation_store import ConversationStore
from .storage.environment_store import EnvironmentStore
from .storage.response_store import ResponseStore
from .storage.vault_store import VaultStore
from .storage.webhook_outbox import WebhookOutbox
from .storage.webhook_store import WebhookStore
from .vaults.needs import VaultsNeeds
from .vaults.tokens import TokenRefresher
from .vector_stores.routes import VectorStoresNeeds
from .vector_stores.service import VectorStoreService
from .webhooks.needs import WebhooksNeeds
from .webhooks.sender import Sender

if TYPE_CHECKING:
    from .agents.traces import TurnSpans


@dataclass
class Services:
    config: GatewayConfig
    engines: Engines  # the models and their engines, by name
    store: ResponseStore
    conversations: ConversationStore
    drain: Drain
    metrics: Metrics
    renderer: PromptRenderer
    runs: Runs
    supervisor: Supervisor  # the app's tasks, each contained; /ready reports those left stopped
    replicas: Replicas
    sealer: Sealer
    mcp: MCPServers
    files: FileService
    vector_stores: VectorStoreService
    skills: SkillService
    sockets: TenantSockets  # open Responses WebSockets, per tenant
    webhooks: WebhookStore  # webhook endpoints (their deliveries: webhooks/deliverer.py)
    webhook_sender: Sender
    webhook_outbox: WebhookOutbox  # webhooks not sent yet: what is not a response's end is queued here
    agents: AgentStore  # the Agents API's agents, sessions, turns and their events
    agent_feed: SessionFeed  # sessions' live events, for their subscribers here
    automations: AutomationStore  # the Agents API's automations and their invocations
    scheduler: Scheduler  # this replica's: fires due automations, delivers and settles their invocations
    vaults: VaultStore  # vaults and their credentials (secrets sealed)
    token_refresher: TokenRefresher  # vault credentials' OAuth tokens, refreshed before they expire
    agent_spans: "TurnSpans | None"  # with tracing on, agent turns' traces as they are made
    agent_environments: EnvironmentStore  # the Agents API's hosted environments
    agent_templates: EnvironmentStore  # and their templates
    sandbox: SandboxManager | None = None  # None: no code_interpreter on this gateway
    browser: BrowserBackends | None = None  # None: no web_search on this gateway


# Every package's needs, each met by the services. A field a package reads that `Services` lacks, or holds
# with another type, fails the type checker on this line, not a request at run time.
EveryPackagesNeeds = tuple[ResponsesNeeds, ConversationsNeeds, FilesNeeds, SkillsNeeds, VectorStoresNeeds, WebhooksNeeds, AgentsNeeds, VaultsNeeds]


def serve_every_package(services: Services) -> EveryPackagesNeeds:
    return (services, services, services, services, services, services, services, services)
