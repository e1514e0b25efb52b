"""What the Responses API (its routes, socket and runs) uses of the app: a part of gateway/services.py's
`Services`. A tool sees less: `ToolNeeds` (tools/base.py)."""

from __future__ import annotations

from typing import Protocol

from ...core.requests import NeedsOf
from ...core.runs import Runs
from ...core.sealed import Sealer
from ...core.tenant_sockets import TenantSockets
from ...engine.renderer import PromptRenderer
from ...engine.routing import Engines
from ...replicas import Replicas
from ...shutdown import Drain
from ...storage.conversation_store import ConversationStore
from ...storage.response_store import ResponseStore
from ..tools.base import ToolNeeds


class ResponsesNeeds(ToolNeeds, Protocol):
    engines: Engines  # the models, by name
    store: ResponseStore
    conversations: ConversationStore
    drain: Drain
    renderer: PromptRenderer
    runs: Runs
    replicas: Replicas
    sealer: Sealer
    sockets: TenantSockets


needs_of = NeedsOf[ResponsesNeeds]()
