"""The `tool_servers:` and `mcp:` sections of the gateway's config: MCP servers, configured and per request."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .namespaces import reserved_problem
from .urls import plain_urls


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolNames(_Section):
    tool_names: list[str] = []


class ApprovalFilter(_Section):
    """OpenAI's filter form: tools that always need approval, and tools that never do."""

    always: ToolNames | None = None
    never: ToolNames | None = None


Approval = Literal["always", "never"] | ApprovalFilter


class ToolServerConfig(_Section):
    """An MCP server the gateway connects to at start-up; a request enables it by `server_label`."""

    label: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$", description="Harmony namespace and server_label")
    transport: Literal["stdio", "sse", "streamable-http"]
    command: list[str] | None = Field(None, min_length=1, description="stdio: the program and its arguments")
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = Field(None, description="sse / streamable-http: the server's endpoint")
    headers: dict[str, str] = {}
    allowed_tools: list[str] | None = None
    require_approval: Approval = "never"
    timeout_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _transport_fields(self) -> "ToolServerConfig":
        problem = reserved_problem(self.label)
        if problem is not None:
            raise ValueError(f"label {problem}")
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"a {self.transport} server needs url")
        return self


class MCPConfig(_Section):
    # URLs that request-level servers (`server_url`) may point at, matched by scheme, host, port and path
    # segment (connectors/urls.py); none by default, so no request can make the gateway connect where the
    # operator did not allow.
    allowed_urls: list[str] = []
    request_server_ttl_s: float = Field(600.0, gt=0, description="Idle request-level sessions are closed after this")
    max_request_servers: int = Field(64, gt=0, description="Request-level sessions kept open in all")
    max_request_servers_per_tenant: int = Field(8, gt=0, description="Request-level sessions one tenant may keep")
    connect_wait_s: float = Field(5.0, ge=0, description="How long a request waits for a server that is connecting")

    @field_validator("allowed_urls")
    @classmethod
    def _plain_urls(cls, value: list[str]) -> list[str]:
        return plain_urls(value)
