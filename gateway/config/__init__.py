"""The gateway's YAML configuration: environment expansion, validation, and errors that name the key."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from connectors.browser.config import BrowserConfig, FetchConfig, SearchConfig
from connectors.config import Approval, ApprovalFilter, MCPConfig, ToolNames, ToolServerConfig

# The sections whose packages read them are defined there (sandbox/ and connectors/ import nothing of the
# gateway); they are composed, and named again, here.
from sandbox.config import SandboxConfig

from ..errors import param_path
from .base import ConfigError, Section
from .data import (
    AgentsConfig,
    ConversationsConfig,
    EmbeddingsConfig,
    FilesConfig,
    IsolationConfig,
    LimitsConfig,
    LoopConfig,
    StorageConfig,
    VectorStoresConfig,
    WebhooksConfig,
)  # fmt: skip
from .serving import OPEN_TENANT, ApiKey, AuthConfig, BodyLimits, EngineConfig, LoggingConfig, ServerConfig, SocketConfig, TracingConfig

__all__ = [
    "OPEN_TENANT", "ApiKey", "Approval", "ApprovalFilter", "AuthConfig", "BodyLimits", "BrowserConfig", "ConfigError",
    "ConversationsConfig", "EmbeddingsConfig", "EngineConfig", "FetchConfig", "FilesConfig", "GatewayConfig",
    "IsolationConfig", "LimitsConfig", "LoggingConfig", "LoopConfig", "MCPConfig", "SandboxConfig", "SearchConfig",
    "ServerConfig", "SocketConfig", "StorageConfig", "ToolNames", "ToolServerConfig", "TracingConfig",
    "VectorStoresConfig", "WebhooksConfig", "AgentsConfig", "load_config", "parse_config",
]  # fmt: skip


class GatewayConfig(Section):
    # One engine (`engine:`), or several by model (`engines:`); exactly one of the two.
    engine: EngineConfig | None = None
    engines: list[EngineConfig] = Field(default_factory=list, max_length=256)
    server: ServerConfig = ServerConfig()
    auth: AuthConfig = AuthConfig()
    logging: LoggingConfig = LoggingConfig()
    storage: StorageConfig = StorageConfig()
    loop: LoopConfig = LoopConfig()
    limits: LimitsConfig = LimitsConfig()
    isolation: IsolationConfig = IsolationConfig()
    conversations: ConversationsConfig = ConversationsConfig()
    files: FilesConfig = FilesConfig()
    vector_stores: VectorStoresConfig = VectorStoresConfig()
    # No section: the code_interpreter tool is refused with a 400.
    sandbox: SandboxConfig | None = None
    tool_servers: list[ToolServerConfig] = []
    mcp: MCPConfig = MCPConfig()
    # No section: the web_search tools are refused with a 400.
    browser: BrowserConfig | None = None
    tracing: TracingConfig = TracingConfig()
    webhooks: WebhooksConfig = WebhooksConfig()
    agents: AgentsConfig = AgentsConfig()

    def files_directory(self) -> str:
        return self.files.directory or str(Path(self.storage.path).parent / "files")

    @model_validator(mode="before")
    @classmethod
    def _without_unset_engines(cls, data: Any) -> Any:
        """An `engines` entry whose url is empty is left out: one config serves a stack with and without an
        optional engine (`url: ${ENGINE_120B_URL:-}`)."""
        if isinstance(data, dict) and isinstance(data.get("engines"), list):
            data = data | {"engines": [entry for entry in data["engines"] if not (isinstance(entry, dict) and entry.get("url") in ("", None))]}
        return data

    def engine_configs(self) -> list[EngineConfig]:
        """Every engine URL, in the order configured (`engine:` is a list of one)."""
        return [self.engine] if self.engine is not None else list(self.engines)

    @model_validator(mode="after")
    def _one_engine_section(self) -> "GatewayConfig":
        if (self.engine is None) == (not self.engines):
            raise ValueError("give exactly one of 'engine' (one engine) and 'engines' (a list, by model)")
        if len(self.engines) > 1:
            unnamed = [index for index, engine in enumerate(self.engines) if engine.model is None]
            if unnamed:
                raise ValueError(f"engines[{unnamed[0]}].model is required where several engines are configured")
            served = {engine.model for engine in self.engines}
            owner: dict[str, str] = {}
            for engine in self.engines:
                for alias in engine.aliases:
                    if alias in served and alias != engine.model or owner.setdefault(alias, engine.model or "") != engine.model:
                        raise ValueError(f"the model name {alias!r} names two models")
        return self

    @model_validator(mode="after")
    def _unique_labels(self) -> "GatewayConfig":
        labels = [server.label for server in self.tool_servers]
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"tool_servers labels must be unique: {', '.join(duplicates)}")
        if self.browser is not None:
            sections: dict[str, SearchConfig | FetchConfig | None] = {"search": self.browser.search, "fetch": self.browser.fetch}
            for name, section in sections.items():
                if section is not None and section.type == "mcp" and section.server not in labels:
                    raise ValueError(f"browser.{name}.server must name one of tool_servers ({section.server!r} does not)")
        return self


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, path: str = "") -> Any:
    """Replace `${VAR}` and `${VAR:-default}` in every string of a parsed YAML tree."""
    if isinstance(value, dict):
        return {key: expand_env(item, f"{path}.{key}" if path else str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_env(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{path}: environment variable {name} is not set")

    expanded = _VARIABLE.sub(substitute, value)
    # A value that was only a variable may be a number or boolean in YAML terms.
    if expanded != value and _VARIABLE.fullmatch(value):
        try:
            parsed = yaml.safe_load(expanded)
        except yaml.YAMLError:
            return expanded
        return parsed if isinstance(parsed, (int, float, bool)) or parsed is None else expanded
    return expanded


def parse_config(raw: Any, source: str = "config") -> GatewayConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping with at least an 'engine' (or 'engines') section")
    try:
        return GatewayConfig.model_validate(expand_env(raw))
    except ValidationError as exc:
        lines = [f"{param_path(tuple(e['loc']), raw) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)]
        raise ConfigError(f"{source}: invalid configuration\n  " + "\n  ".join(lines)) from None


def load_config(path: str | os.PathLike[str]) -> GatewayConfig:
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {exc}") from None
    return parse_config(raw, str(file))
