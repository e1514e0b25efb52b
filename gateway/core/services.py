"""What a request uses of the app: made once at start-up (app.py), shared by every route and run.

The services of packages above this one (files, responses) are named for the type checker only: this
module is imported by them, and imports none of them at run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sandbox.manager import SandboxManager
from tools.browser import BrowserBackends
from tools.servers import MCPServers

from ..config import GatewayConfig
from ..engine import EngineClient
from ..harmony import PromptRenderer
from ..metrics import Metrics
from ..replicas import Replicas
from ..shutdown import Drain
from ..store import ResponseStore
from .conversation_store import ConversationStore

if TYPE_CHECKING:
    from ..files.service import FileService
    from ..responses.log import Runs
    from ..responses.sealed import Sealer
    from ..responses.socket import TenantSockets
    from ..skills.service import SkillService


@dataclass
class Services:
    config: GatewayConfig
    engine: EngineClient
    store: ResponseStore
    conversations: ConversationStore
    drain: Drain
    metrics: Metrics
    renderer: PromptRenderer
    runs: Runs
    replicas: Replicas
    sealer: Sealer
    mcp: MCPServers
    files: FileService
    skills: SkillService
    sockets: TenantSockets  # open Responses WebSockets, per tenant
    sandbox: SandboxManager | None = None  # None: no code_interpreter on this gateway
    browser: BrowserBackends | None = None  # None: no web_search on this gateway
