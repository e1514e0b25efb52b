"""What the Skills routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from ..config import GatewayConfig
from ..core.requests import NeedsOf
from ..files.service import FileService
from .service import SkillService


class SkillsNeeds(Protocol):
    config: GatewayConfig
    files: FileService
    skills: SkillService


needs_of = NeedsOf[SkillsNeeds]()
