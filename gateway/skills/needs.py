"""What the Skills routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from starlette.requests import HTTPConnection

from ..config import GatewayConfig
from ..core.requests import services_of
from ..files.service import FileService
from .service import SkillService


class SkillsNeeds(Protocol):
    config: GatewayConfig
    files: FileService
    skills: SkillService


def needs_of(request: HTTPConnection) -> SkillsNeeds:
    needs: SkillsNeeds = services_of(request)
    return needs
