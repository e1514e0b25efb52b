"""What the Files and Containers routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from starlette.requests import HTTPConnection

from sandbox.manager import SandboxManager

from ..config import GatewayConfig
from ..core.requests import services_of
from .service import FileService


class FilesNeeds(Protocol):
    config: GatewayConfig
    files: FileService
    sandbox: SandboxManager | None


def needs_of(request: HTTPConnection) -> FilesNeeds:
    needs: FilesNeeds = services_of(request)
    return needs
