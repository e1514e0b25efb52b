"""What a response's run uses of the app: made once at start-up (app.py), shared by every run."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.manager import SandboxManager
from tools.browser import BrowserBackends
from tools.servers import MCPServers

from ..config import GatewayConfig
from ..conversations.store import ConversationStore
from ..engine import EngineClient
from ..files.service import FileService
from ..harmony import PromptRenderer
from ..metrics import Metrics
from ..replicas import Replicas
from ..shutdown import Drain
from ..store import ResponseStore
from .log import Runs
from .sealed import Sealer


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
    sandbox: SandboxManager | None = None  # None: no code_interpreter on this gateway
    browser: BrowserBackends | None = None  # None: no web_search on this gateway
