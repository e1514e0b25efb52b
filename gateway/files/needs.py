"""What the Files and Containers routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from sandbox.manager import SandboxManager

from ..config import GatewayConfig
from ..core.requests import NeedsOf
from .service import FileService


class FilesNeeds(Protocol):
    config: GatewayConfig
    files: FileService
    sandbox: SandboxManager | None


needs_of = NeedsOf[FilesNeeds]()
