"""The gateway's YAML configuration: environment expansion, validation, and errors that name the key."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# The sections whose packages read them are defined there (sandbox/ and tools/ import nothing of the
# gateway); they are composed, and named again, here.
from sandbox.config import SandboxConfig
from tools.browser.config import BrowserConfig, FetchConfig, SearchConfig
from tools.config import Approval, ApprovalFilter, MCPConfig, ToolNames, ToolServerConfig
from tools.urls import plain_urls

from .errors import param_path
from .web.body import BodyLimits

__all__ = [
    "Approval", "ApprovalFilter", "BrowserConfig", "FetchConfig", "GatewayConfig", "MCPConfig", "SandboxConfig",
    "SearchConfig", "ToolNames", "ToolServerConfig", "load_config", "parse_config",
]  # fmt: skip


class ConfigError(Exception):
    pass


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineConfig(_Section):
    """One engine URL: a vLLM server, or a router in front of several serving one model."""

    url: str = Field(description="Base URL of the vLLM server, e.g. http://vllm:8000 (reached directly, never through a proxy)")
    # The served model name requests ask for; default (one engine only): the first of its /v1/models.
    # Several entries naming one model are its URLs, tried in turn when one fails.
    model: str | None = Field(None, min_length=1, max_length=256)
    # Other names a request's `model` may give for it (`gpt-oss-20b` for `openai/gpt-oss-20b`).
    aliases: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(default_factory=list, max_length=64)
    api_key: str | None = None
    connect_timeout_s: float = Field(5.0, gt=0)
    # The longest silence tolerated between two chunks of a stream before the response fails: chunks with
    # data, so that an engine (or a proxy) writing only SSE comments does not keep a call alive.
    read_timeout_s: float = Field(300.0, gt=0)
    # The longest one engine call may stream, however steadily it writes.
    call_timeout_s: float = Field(1800.0, gt=0)
    # When the engine does not report max_model_len and a request gives no max_output_tokens.
    default_max_tokens: int = Field(4096, gt=0)
    max_connections: int = Field(512, gt=0)
    # A header carrying a stable key per conversation on every engine request, so that a router in front of
    # several vLLM replicas (vLLM production-stack's session routing, for one) keeps a tool loop on the
    # replica that holds its prefix cache. Unset: no header.
    session_header: str | None = Field(None, pattern=r"^[A-Za-z0-9-]{1,64}$")
    # Each engine call's grammar (a strict `text.format`, strict arguments, the calls `tool_choice` allows) sent
    # as vLLM's `structured_outputs.structural_tag`. auto: sent, and where the engine refuses it (a 400 naming
    # `structured_outputs`) the call is made again without it, validated after the fact instead (one warning,
    # and `gateway_structured_outputs_refused_total`); on: a refusal fails the response; off: never sent.
    structured_outputs: Literal["auto", "on", "off"] = "auto"
    # vLLM ignores fields it does not know (one before 0.10.2 takes `structured_outputs` and enforces nothing),
    # so what a grammar held is checked at its end. true: the first call or answer that breaks its grammar marks
    # its engine URL as not enforcing (logged, `gateway_grammar_violations_total`, `/ready`): no grammar is sent
    # to it from then on and its calls are held back and checked before they are shown, until it reports
    # another version. false: each such call is refused alone (the model told), the engine still trusted.
    distrust_on_violation: bool = True
    # vLLM runs with `--scheduling-policy priority`: `service_tier` priority and flex are sent as the
    # request's `priority` (responses/loop/service_tier.py); false: they are a 400.
    priority_scheduling: bool = False
    # A generation the engine broke off (connection reset, body cut off, a 5xx, an error in the stream, an
    # abort) goes on from the tokens already received, through this URL again (a router sends it to a live
    # instance) or the model's next one: at most this many times per engine call, within this many seconds.
    resume_attempts: int = Field(3, ge=0, le=20)
    resume_within_s: float = Field(15.0, gt=0, le=600)
    # How often each engine's /health and /v1/models are read: a dead one is skipped until it answers again.
    health_interval_s: float = Field(2.0, gt=0, le=300)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError("must be http(s)://host[:port][/path]")
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number in range)
        return url


class SocketConfig(_Section):
    """The Responses API's WebSocket mode (`client.responses.connect()`)."""

    enabled: bool = Field(True, description="false: upgrades are refused (404) and clients use HTTP (Codex falls back on its own)")
    max_per_tenant: int = Field(16, ge=1, description="Open sockets one tenant may hold; more are refused with a 429")
    idle_timeout_s: float = Field(600.0, gt=0, description="A socket with nothing received and nothing running this long is closed")
    max_queued: int = Field(8, ge=1, description="response.create events waiting behind the running one; more are errors")
    max_queued_bytes: int = Field(
        32 * 1024 * 1024, ge=1024, description="What the events waiting behind the running one may weigh once parsed (estimated); more are errors"
    )
    max_pending_steers: int = Field(8, ge=1, description="Steering inputs queued on one socket, for any of its responses; more fail")
    max_pending_steer_bytes: int = Field(1024 * 1024, ge=1024, description="The bytes of the steering inputs queued on one socket; more fail")
    # permessage-deflate compresses every event (one per token) on its own: ~50 µs a message, a sixth of a
    # socket turn's CPU (bench/socket_turns.py), for events of a few hundred bytes. For slow links only.
    per_message_deflate: bool = Field(False, description="Offer permessage-deflate compression to clients that ask for it")


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    # On SIGTERM: stop accepting, let running responses finish this long, then end them with response.failed.
    shutdown_grace_s: float = Field(30.0, ge=0)
    # After SIGTERM, keep the port open this long with /ready and new requests answered 503 (draining).
    drain_delay_s: float = Field(0.0, ge=0, le=300)
    # Bounds on what a client can make the gateway hold or compute before it answers.
    max_body_bytes: int = Field(8 * 1024 * 1024, gt=0, description="Larger request bodies get a 413")
    max_input_chars: int = Field(1_000_000, gt=0, description="Characters of text one request may carry")
    max_unbroken_chars: int = Field(4096, ge=256, description="Longest run the tokenizer gets in one piece")
    header_timeout_s: float = Field(10.0, gt=0, description="A request's head must arrive within this")
    body_timeout_s: float = Field(30.0, gt=0, description="A request's body must arrive within this")
    # A stream whose client reads nothing for this long is closed and its response stopped (engine
    # request aborted), as if the client had disconnected.
    send_timeout_s: float = Field(60.0, gt=0)
    # How often the event loop's lag is sampled (gateway_event_loop_lag_seconds); a stall shorter than
    # this may go unseen.
    loop_monitor_interval_s: float = Field(0.01, ge=0.001, le=1.0)
    # Tools of OpenAI's that nothing here runs (web_search, file_search, ...): a 400 naming them, or, set
    # true, dropped with a warning, for clients that always declare them.
    drop_unavailable_tools: bool = False
    # A code_interpreter_call's `outputs` are null unless the request includes `code_interpreter_call.outputs`,
    # as OpenAI answers; true shows them always, for clients written against gateways that did.
    always_include_code_outputs: bool = False
    # The key (32 bytes, base64) that seals reasoning.encrypted_content, compaction items and stored run
    # requests; unset: one per process. Rotating it: the old key goes to retired_reasoning_keys, which open
    # what they sealed and seal nothing new.
    reasoning_key: str | None = None
    # `reasoning.summary` (auto, concise, detailed): each reasoning item's summary, written by the model in an
    # engine call of its own (responses/loop/summaries.py); off: every item's summary is empty.
    reasoning_summaries: Literal["on", "off"] = "on"
    reasoning_summary_timeout_s: float = Field(30.0, gt=0)  # past this, the item ends without a summary
    reasoning_summary_max_tokens: int = Field(512, ge=16)
    reasoning_summaries_per_call: int = Field(4, ge=0, description="Reasoning items summarised per engine call; those past it end without one")
    render_processes: int = Field(2, ge=1, le=64, description="Processes that tokenise large prompts, shared by the tenants in turn")
    retired_reasoning_keys: list[str] = Field([], max_length=16)
    websocket: SocketConfig = SocketConfig()

    @field_validator("reasoning_key")
    @classmethod
    def _key_is_32_bytes(cls, value: str | None) -> str | None:
        return _checked_key(value) if value else None

    @field_validator("retired_reasoning_keys")
    @classmethod
    def _keys_are_32_bytes(cls, value: list[str]) -> list[str]:
        return [_checked_key(key) for key in value]

    def body_limits(self) -> "BodyLimits":
        return BodyLimits(self.max_body_bytes, self.max_input_chars, self.max_unbroken_chars, self.body_timeout_s)


def _checked_key(value: str) -> str:
    try:
        key = base64.b64decode(value, validate=True)
    except ValueError:
        raise ValueError("must be base64") from None
    if len(key) != 32:
        raise ValueError("must be 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)")
    return value


class ApiKey(_Section):
    """A bearer key and the tenant it acts for; keys of one tenant share its responses and sandboxes."""

    key: str = Field(min_length=1)
    tenant: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:-]{1,64}$")

    def tenant_id(self) -> str:
        """The tenant; a key that names none is a tenant of its own (named by a digest, never the key)."""
        return self.tenant or "key-" + hashlib.sha256(self.key.encode()).hexdigest()[:16]


OPEN_TENANT = "default"  # every request's tenant when no keys are configured


class AuthConfig(_Section):
    """Bearer keys clients must present; none configured means the gateway is open (one tenant)."""

    api_keys: list[ApiKey] = []
    metrics_need_key: bool = False  # /health and /ready are always open

    @field_validator("api_keys", mode="before")
    @classmethod
    def _from_environment(cls, value: Any) -> Any:
        """`api_keys: ${KEYS}` with KEYS="k1,k2": a comma-separated string; empty or unset means none.
        Each entry is a key, or `{key, tenant}`."""
        if value is None:
            return []
        if isinstance(value, str):
            value = [key.strip() for key in value.split(",") if key.strip()]
        if isinstance(value, list):
            return [{"key": entry} if isinstance(entry, str) else entry for entry in value]
        return value

    @model_validator(mode="after")
    def _no_empty_keys(self) -> "AuthConfig":
        if any(not entry.key.strip() for entry in self.api_keys):
            raise ValueError("api_keys must not be empty strings")
        return self


class LoggingConfig(_Section):
    format: Literal["text", "json"] = "text"
    level: Literal["debug", "info", "warning", "error"] = "info"
    access_log: bool = True


class StorageConfig(_Section):
    # The database: `sqlite:///PATH` (embedded, one gateway process) or `postgresql://USER:PASS@HOST/DB`
    # (shared by several replicas). Unset: SQLite at `path`.
    url: str | None = Field(None, pattern=r"^(sqlite:///|postgres(ql)?://)")
    path: str = "data/responses.sqlite3"
    pool_size: int = Field(10, gt=0, le=200, description="PostgreSQL connections per replica")
    # While the database is unreachable (a restart, a failover), statements are retried this long.
    retry_s: float = Field(15.0, ge=0)
    # A replica renews its lease every lease_s / 3; the background runs of one whose lease ran out are
    # adopted by another replica (responses/loop/adoption.py), or ended as failed where they cannot be.
    lease_s: float = Field(10.0, gt=0)
    # This process's name among the replicas; unset: made up at start (host, process id, random part).
    replica_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._:-]{1,100}$")
    # Stored responses (and a background response's events) older than this are removed; unset: kept.
    ttl_s: float | None = Field(None, gt=0)
    sweep_interval_s: float = Field(60.0, gt=0)  # how often expired responses are looked for

    def database_url(self) -> str:
        return self.url or f"sqlite:///{self.path}"


class FilesConfig(_Section):
    """The Files and Containers APIs: uploads, and the files of code_interpreter containers."""

    # Where file contents are kept (replicas sharing a database must share this directory too); unset:
    # `files/` beside the SQLite database (storage.path).
    directory: str | None = None
    max_file_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Larger uploads get a 413")
    # All of a tenant's files together: uploads and containers' files. Past it, uploads get a 413.
    tenant_quota_bytes: int = Field(10 * 1024**3, gt=0)
    # An upload that sends nothing for this long is dropped (its size is bounded, not its duration).
    upload_idle_timeout_s: float = Field(30.0, gt=0)
    # A container's files in all, as copied into its /mnt/data (the Docker backend's is 256m).
    max_container_bytes: int = Field(256 * 1024 * 1024, gt=0)
    max_container_files: int = Field(500, gt=0)
    # Containers expire this long after they were last used, unless created with expires_after.
    container_idle_minutes: int = Field(20, gt=0, le=7 * 24 * 60)
    max_container_idle_minutes: int = Field(24 * 60, gt=0, le=30 * 24 * 60)
    # Text given to the model for one input_file part (PDFs, CSVs, ...); longer text is a 400.
    max_input_file_chars: int = Field(200_000, gt=0)
    # A PDF given as input_file is read only up to this size, its text extracted in a worker process
    # (isolation:) within this time.
    max_input_pdf_bytes: int = Field(32 * 1024 * 1024, gt=0)
    pdf_timeout_s: float = Field(20.0, gt=0)
    # Counts per tenant, each checked with the write it allows: uploads, and containers not expired.
    max_files_per_tenant: int = Field(10_000, gt=0)
    max_containers_per_tenant: int = Field(100, gt=0)


class EmbeddingsConfig(_Section):
    """An OpenAI-compatible `/v1/embeddings` endpoint (vLLM serving an embedding model with its pooling runner,
    say): with it, vector stores are searched by meaning as well as by words (hybrid ranking)."""

    url: str = Field(description="Base URL, e.g. http://embeddings:8000 (its /v1/embeddings is called)")
    model: str
    dimensions: int = Field(gt=0, le=4096, description="The length of the model's vectors")
    api_key: str | None = None
    batch_size: int = Field(64, gt=0, le=2048, description="Texts per request")
    timeout_s: float = Field(30.0, gt=0)


class VectorStoresConfig(_Section):
    """The Vector Stores API and the file_search tool (gateway/vector_stores/)."""

    # Counts and sizes per tenant, each checked with the write it allows.
    max_stores_per_tenant: int = Field(100, gt=0)
    max_files_per_store: int = Field(10_000, gt=0)
    # The text of all of a tenant's indexed files together (what `usage_bytes` counts).
    tenant_quota_bytes: int = Field(1024**3, gt=0)
    # One file's text: a longer one fails (`last_error`), the others go on.
    max_file_chars: int = Field(5_000_000, gt=0)
    # Files read, chunked and indexed at once by one replica (the chunking runs in the isolation workers).
    ingest_concurrency: int = Field(2, gt=0, le=64)
    # One file's extraction and chunking, in a worker process.
    ingest_timeout_s: float = Field(60.0, gt=0)
    # A search's statements are stopped past this (a 400 for the API, a failed call for file_search); one
    # tenant runs at most `max_searches_per_tenant` at once, tenants served in turn.
    search_timeout_s: float = Field(5.0, gt=0, le=300)
    max_concurrent_searches: int = Field(8, gt=0, le=1024)
    max_searches_per_tenant: int = Field(2, gt=0, le=1024)
    # No section: search by words only (SQLite's FTS5, PostgreSQL's full-text search).
    embeddings: EmbeddingsConfig | None = None


class LoopConfig(_Section):
    # Engine calls one response may make (a tool call and its result cost one each).
    max_turns: int = Field(16, gt=0)
    # Background responses one tenant may have running at once; past it, a 429.
    max_background_per_tenant: int = Field(32, gt=0)


class LimitsConfig(_Section):
    """Foreground responses (HTTP, Chat Completions, WebSocket) running at once on one replica; past
    either, a 429. Background ones are counted by `loop.max_background_per_tenant`."""

    max_concurrent_per_tenant: int = Field(100, gt=0, description="Running at once for one tenant")
    max_concurrent: int = Field(1000, gt=0, description="Running at once for all tenants together")


class ConversationsConfig(_Section):
    # Items one conversation may hold: adding more is a 400, as is a response that would add to it.
    max_items: int = Field(1000, gt=0, le=100_000)


class IsolationConfig(_Section):
    """Worker processes for work whose cost hostile input decides: PDF text, strict functions' argument
    checks, web pages cleaned to text. Each is killed past its memory or its time."""

    workers: int = Field(2, gt=0, le=64, description="Busy at once; more calls wait (within their time)")
    memory: str = Field("1g", pattern=r"^\d+[kmg]?$", description="Address space of one worker")
    schema_timeout_s: float = Field(2.0, gt=0, le=60, description="One check of a call's arguments")


class TracingConfig(_Section):
    """OpenTelemetry traces (gateway/tracing.py), sent over OTLP/HTTP. Also on without this section when
    OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, as OpenTelemetry's own
    configuration has it (and off with OTEL_SDK_DISABLED=true); the exporter reads the other OTEL_*
    variables (headers, timeout) itself."""

    enabled: bool = False
    # The traces endpoint (`http://collector:4318/v1/traces`); unset: the OTEL_* variables, then the default.
    endpoint: str | None = None
    service_name: str = Field("harmony-gateway", min_length=1, max_length=128)
    # Prompt and output text in spans; off, spans carry names, ids, counts and timings only.
    capture_content: bool = False
    export_delay_s: float = Field(2.0, gt=0, le=60, description="How long finished spans wait to be sent in a batch")


class WebhooksConfig(_Section):
    """Webhook endpoints (gateway/webhooks/): where background responses report that they ended."""

    # URLs endpoints may name beyond the public internet, matched by scheme, host, port and path segment
    # (tools/urls.py): self-hosted receivers usually live on private networks, and allowing one is the
    # operator's choice. Every other URL must be https and resolve to public addresses only.
    allowed_urls: list[str] = []
    timeout_s: float = Field(10.0, gt=0, le=300, description="One attempt: connect, send, and read the answer's head")
    # Failed attempts are tried again after first_retry_s, doubling up to max_retry_interval_s, each wait
    # jittered; an event not delivered within retry_for_s of its response ending is given up (OpenAI: 72 h).
    first_retry_s: float = Field(5.0, gt=0)
    max_retry_interval_s: float = Field(3600.0, gt=0)
    retry_for_s: float = Field(72 * 3600.0, gt=0)
    max_concurrent: int = Field(32, gt=0, le=1024, description="Attempts one replica makes at once")
    max_in_flight_per_tenant: int = Field(8, gt=0, le=1024, description="Attempts one replica makes at once for one tenant")
    max_in_flight_per_endpoint: int = Field(4, gt=0, le=1024, description="Attempts one replica makes at once to one endpoint")
    # An endpoint that failed this many attempts in a row is left alone for breaker_open_s, then tried once.
    breaker_failures: int = Field(5, gt=0, le=1000)
    breaker_open_s: float = Field(30.0, gt=0)
    max_tests_per_tenant: int = Field(2, gt=0, le=64, description="`/test` calls of one tenant sent at once; more wait their turn")
    poll_interval_s: float = Field(1.0, gt=0, le=60, description="How often retries due, and other replicas' stalled deliveries, are looked for")
    max_endpoints_per_tenant: int = Field(20, gt=0, le=1000)
    keep_s: float = Field(7 * 24 * 3600.0, gt=0, description="Delivered and given-up events (and their attempts) are kept this long")

    @field_validator("allowed_urls")
    @classmethod
    def _plain_urls(cls, value: list[str]) -> list[str]:
        return plain_urls(value)


class GatewayConfig(_Section):
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
