"""The Agents API's request bodies, field for field as openai 3.57 types them (`agent_create_params`,
`agent_tool_param`, `session_create_params`, `environment_param`, `agent_session_input_param`). What this
gateway cannot do is named in a 400 (`unsupported`), never dropped in silence."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from ..core.models import Metadata, StrictModel
from ..responses.shapes.input_models import ContentPart
from ..responses.shapes.request import TextConfig

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
ServiceTier = Literal["auto", "default", "flex", "priority", "fast", "ultrafast"]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class Reasoning(StrictModel):
    effort: Effort | None = None
    summary: Literal["concise", "detailed", "auto"] | None = None


class FunctionTool(StrictModel):
    type: Literal["function"]
    name: Name
    description: str = Field(max_length=16_384)
    parameters: dict[str, Any]
    defer_loading: bool = False
    async_: bool | None = Field(None, alias="async")


class HTTPTransport(StrictModel):
    type: Literal["http"]
    server_url: str = Field(max_length=2048)
    headers: dict[str, str] | None = None
    authorization: str | None = Field(None, max_length=8192)


class StdioTransport(StrictModel):
    type: Literal["stdio"]
    command: str
    cwd: str
    args: list[str] | None = None
    env: dict[str, str] | None = None
    env_vars: list[str] | None = None


class McpTool(StrictModel):
    type: Literal["mcp"]
    server_label: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    transport: Annotated[Union[HTTPTransport, StdioTransport], Field(discriminator="type")]
    allowed_tools: list[str] | None = None
    connection_origin: Literal["service", "environment"] | None = None
    credential_id: str | None = None
    request_metadata: dict[str, Any] | None = None
    required: bool = False


class Location(StrictModel):
    city: str | None = None
    country: str | None = None
    region: str | None = None
    timezone: str | None = None


class WebSearchTool(StrictModel):
    type: Literal["web_search"]
    allowed_domains: list[str] | None = None
    context_size: Literal["low", "medium", "high"] | None = None
    location: Location | None = None
    mode: Literal["disabled", "cached", "live"] | None = None


class OtherTool(StrictModel):
    """Tools the SDK names that this gateway does not run: refused by name (agents/objects.py)."""

    type: Literal["tool_search", "programmatic_tool_calling", "computer_use"]
    enabled: bool | None = None
    include_screenshots: bool | None = None


class AutomationsTool(StrictModel):
    """Lets the agent schedule its own wake-ups (agents/wakeups.py)."""

    type: Literal["automations"]


AgentTool = Annotated[Union[FunctionTool, McpTool, WebSearchTool, AutomationsTool, OtherTool], Field(discriminator="type")]


class MultiAgent(StrictModel):
    enabled: bool = False
    max_concurrent_subagents: int | None = None


class Compaction(StrictModel):
    async_: bool | None = Field(None, alias="async")


class Experimental(StrictModel):
    time_awareness: bool = False


class AgentConfig(StrictModel):
    """An agent's configuration: `POST /v1/agents` and a session's inline `agent`."""

    model: str = Field(min_length=1, max_length=256)
    name: str | None = Field(None, max_length=256)
    instructions: str | None = Field(None, max_length=256_000)
    metadata: Metadata | None = None
    reasoning: Reasoning | None = None
    text: TextConfig | None = None
    service_tier: ServiceTier | None = None
    tools: list[AgentTool] | None = Field(None, max_length=128)
    multi_agent: MultiAgent | None = None
    compaction: Compaction | None = None
    experimental: Experimental | None = None


class AgentUpdate(AgentConfig):
    """`POST /v1/agents/{id}`: what is given replaces what the agent had (the model too, when given)."""

    model: str | None = Field(None, min_length=1, max_length=256)  # type: ignore[assignment]


class NoEnvironment(StrictModel):
    type: Literal["none"]


class Network(StrictModel):
    access: Literal["enabled", "disabled", "restricted"]
    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None


class Packages(StrictModel):
    npm: list[str] | None = None
    python: list[str] | None = None
    system: list[str] | None = None


class FileByID(StrictModel):
    type: Literal["file_id"]
    file_id: str = Field(min_length=1, max_length=128)
    path: str = Field(min_length=1, max_length=1024)


class InlineFile(StrictModel):
    type: Literal["inline"]
    data: str  # standard base64; bounded by the request body's limit
    path: str = Field(min_length=1, max_length=1024)


EnvironmentFile = Annotated[Union[FileByID, InlineFile], Field(discriminator="type")]


class SetupCommand(StrictModel):
    command: str = Field(min_length=1, max_length=16_384)
    cwd: str | None = Field(None, max_length=1024)


class HostedEnvironment(StrictModel):
    type: Literal["openai_hosted"]
    environment_id: str | None = None
    environment_template_id: str | None = None
    capability_directories: list[str] | None = None
    container_size: Literal["small", "medium", "large"] | None = None
    desktop: dict[str, Any] | None = None
    env: dict[str, str] | None = None
    files: list[EnvironmentFile] | None = Field(None, max_length=100)
    network: Network | None = None
    packages: Packages | None = None
    plugins: list[dict[str, Any]] | None = None
    setup_commands: list[SetupCommand] | None = Field(None, max_length=32)
    skills: list[dict[str, Any]] | None = None


class SelfHostedEnvironment(StrictModel):
    type: Literal["self_hosted"]
    workspace_directory: str
    capability_directories: list[str] | None = None


Environment = Annotated[Union[NoEnvironment, HostedEnvironment, SelfHostedEnvironment], Field(discriminator="type")]


class InputMessage(StrictModel):
    type: Literal["message"] = "message"
    role: Literal["user"]
    content: list[ContentPart] = Field(min_length=1)


class PromptCacheOptions(StrictModel):
    ttl: Literal["30m", "12h"]


class StreamOptions(StrictModel):
    include_obfuscation: bool | None = None


class SessionCreate(StrictModel):
    environment: Environment
    agent: AgentConfig | None = None
    agent_id: str | None = None
    input: str | list[InputMessage] | None = None
    metadata: Metadata | None = None
    prompt_cache_options: PromptCacheOptions | None = None
    review: Literal["none", "auto_review"] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    vault_ids: list[str] | None = Field(None, max_length=10)


class SessionAgentUpdate(StrictModel):
    model: str | None = Field(None, min_length=1, max_length=256)
    reasoning: Reasoning | None = None
    service_tier: ServiceTier | None = None
    tools: list[AgentTool] | None = Field(None, max_length=128)


class SessionUpdate(StrictModel):
    agent: SessionAgentUpdate | None = None
    metadata: Metadata | None = None
    prompt_cache_options: PromptCacheOptions | None = None
    review: Literal["none", "auto_review"] | None = None


class MessageInput(StrictModel):
    type: Literal["agent.session.input.message"]
    input: list[InputMessage] = Field(min_length=1)


class CancelInput(StrictModel):
    type: Literal["agent.session.input.cancel"]


class ToolResultInput(StrictModel):
    type: Literal["agent.session.input.tool_result"]
    turn_id: str = Field(min_length=1, max_length=128)
    call_id: str = Field(min_length=1, max_length=128)
    success: bool
    output: str | list[ContentPart] | None = None
    error: str | None = None


class ApprovalDecision(StrictModel):
    type: Literal["mcp_tool_call"]
    decision: Literal["approve", "deny", "cancel"]


class ApprovalInput(StrictModel):
    type: Literal["agent.session.input.mcp_approval_request_result"]
    request_id: str = Field(min_length=1, max_length=128)
    response: ApprovalDecision


class ComputerApprovalInput(StrictModel):
    type: Literal["agent.session.input.computer_use_approval_request_result"]
    request_id: str
    response: dict[str, Any]


InputEvent = Annotated[Union[MessageInput, CancelInput, ToolResultInput, ApprovalInput, ComputerApprovalInput], Field(discriminator="type")]


class InputEvents(StrictModel):
    events: list[InputEvent] = Field(min_length=1, max_length=64)
