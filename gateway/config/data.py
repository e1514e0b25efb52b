"""The sections of what the gateway keeps: storage, files, vector stores, conversations, webhooks, and the
loop's and the isolation workers' bounds."""

from __future__ import annotations

from pydantic import Field, field_validator

from connectors.urls import plain_urls

# The sections whose packages read them are defined there (sandbox/ and tools/ import nothing of the
# gateway); they are composed, and named again, here.
from .base import Section


class StorageConfig(Section):
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


class FilesConfig(Section):
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


class EmbeddingsConfig(Section):
    """An OpenAI-compatible `/v1/embeddings` endpoint (vLLM serving an embedding model with its pooling runner,
    say): with it, vector stores are searched by meaning as well as by words (hybrid ranking)."""

    url: str = Field(description="Base URL, e.g. http://embeddings:8000 (its /v1/embeddings is called)")
    model: str
    dimensions: int = Field(gt=0, le=4096, description="The length of the model's vectors")
    api_key: str | None = None
    batch_size: int = Field(64, gt=0, le=2048, description="Texts per request")
    timeout_s: float = Field(30.0, gt=0)


class VectorStoresConfig(Section):
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
    # How often expired stores (`expires_after`) are emptied: their files and chunks removed, the store kept.
    sweep_interval_s: float = Field(300.0, gt=0)
    # On PostgreSQL with pgvector 0.8+: stores holding fewer chunks than this (together) are searched by meaning
    # exactly, every vector measured, which is as fast there as the approximate index and never misses.
    exact_search_below: int = Field(10_000, ge=0)
    # No section: search by words only (SQLite's FTS5, PostgreSQL's full-text search).
    embeddings: EmbeddingsConfig | None = None


class LoopConfig(Section):
    # Engine calls one response may make (a tool call and its result cost one each).
    max_turns: int = Field(16, gt=0)
    # Background responses one tenant may have running at once; past it, a 429.
    max_background_per_tenant: int = Field(32, gt=0)


class LimitsConfig(Section):
    """Foreground responses (HTTP, Chat Completions, WebSocket) running at once on one replica; past
    either, a 429. Background ones are counted by `loop.max_background_per_tenant`."""

    max_concurrent_per_tenant: int = Field(100, gt=0, description="Running at once for one tenant")
    max_concurrent: int = Field(1000, gt=0, description="Running at once for all tenants together")


class ConversationsConfig(Section):
    # Items one conversation may hold: adding more is a 400, as is a response that would add to it.
    max_items: int = Field(1000, gt=0, le=100_000)


class IsolationConfig(Section):
    """Worker processes for work whose cost hostile input decides: PDF text, strict functions' argument
    checks, web pages cleaned to text. Each is killed past its memory or its time."""

    workers: int = Field(2, gt=0, le=64, description="Busy at once; more calls wait (within their time)")
    memory: str = Field("1g", pattern=r"^\d+[kmg]?$", description="Address space of one worker")
    schema_timeout_s: float = Field(2.0, gt=0, le=60, description="One check of a call's arguments")


class AgentsConfig(Section):
    """The Agents API (gateway/agents/): each tenant's bounds."""

    max_agents_per_tenant: int = Field(1000, gt=0, le=1_000_000)
    max_sessions_per_tenant: int = Field(10_000, gt=0, le=10_000_000, description="Sessions kept, idle or not")
    max_running_sessions_per_tenant: int = Field(32, gt=0, le=100_000, description="Sessions whose turn runs at once")
    max_artifact_bytes_per_tenant: int = Field(1 << 30, gt=0, description="Hosted turns' artifacts kept, all sessions together")
    max_environments_per_tenant: int = Field(1000, gt=0, le=1_000_000, description="Hosted environments kept, and environment templates")
    max_automations_per_tenant: int = Field(1000, gt=0, le=1_000_000, description="Automations kept, active or not")


class WebhooksConfig(Section):
    """Webhook endpoints (gateway/webhooks/): where background responses report that they ended."""

    # URLs endpoints may name beyond the public internet, matched by scheme, host, port and path segment
    # (connectors/urls.py): self-hosted receivers usually live on private networks, and allowing one is the
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
