"""What the Conversations routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from starlette.requests import HTTPConnection

from ..config import GatewayConfig
from ..core.requests import services_of
from ..files.service import FileService
from ..storage.conversation_store import ConversationStore


class ConversationsNeeds(Protocol):
    config: GatewayConfig
    files: FileService
    conversations: ConversationStore


def needs_of(request: HTTPConnection) -> ConversationsNeeds:
    needs: ConversationsNeeds = services_of(request)
    return needs
