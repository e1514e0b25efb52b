"""What the Conversations routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from ..config import GatewayConfig
from ..core.requests import NeedsOf
from ..files.service import FileService
from ..storage.conversation_store import ConversationStore


class ConversationsNeeds(Protocol):
    config: GatewayConfig
    files: FileService
    conversations: ConversationStore


needs_of = NeedsOf[ConversationsNeeds]()
