"""The serving sections: engines, the HTTP server and its sockets, keys and tenants, logs, traces."""

from __future__ import annotations

import base64
import hashlib
import urllib.parse
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

# The sections whose packages read them are defined there (sandbox/ and tools/ import nothing of the
# gateway); they are composed, and named again, here.
from .base import Section


class EngineConfig(Section):
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


class SocketConfig(Section):
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


@dataclass(frozen=True)
class BodyLimits:
    """What a request body may be: read by web/body.py for every door."""

    max_bytes: int
    max_text_chars: int
    max_unbroken_chars: int
    read_timeout_s: float


class ServerConfig(Section):
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


class ApiKey(Section):
    """A bearer key and the tenant it acts for; keys of one tenant share its responses and sandboxes."""

    key: str = Field(min_length=1)
    tenant: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:-]{1,64}$")

    def tenant_id(self) -> str:
        """The tenant; a key that names none is a tenant of its own (named by a digest, never the key)."""
        return self.tenant or "key-" + hashlib.sha256(self.key.encode()).hexdigest()[:16]


OPEN_TENANT = "default"  # every request's tenant when no keys are configured


class AuthConfig(Section):
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


class LoggingConfig(Section):
    format: Literal["text", "json"] = "text"
    level: Literal["debug", "info", "warning", "error"] = "info"
    access_log: bool = True


class TracingConfig(Section):
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
