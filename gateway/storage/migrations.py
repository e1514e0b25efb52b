"""The schema, as numbered migrations applied in order at start-up; `schema_version` records how far a
database has come. A migration is never edited once released: a change is a new migration.

Both dialects get the same versions; where they spell a type differently, each has its own statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from .database import Dialect, StorageError, Tx
from .migrations_agents import V13_AGENTS, V13_EVENTS, V14_AUTOMATIONS, V14_VAULTS


@dataclass(frozen=True)
class Migration:
    version: int
    sqlite: tuple[str, ...]
    postgresql: tuple[str, ...]

    def statements(self, dialect: Dialect) -> tuple[str, ...]:
        return {Dialect.SQLITE: self.sqlite, Dialect.POSTGRESQL: self.postgresql}[dialect]


def _both(*statements: str) -> tuple[str, ...]:
    return statements


_RESPONSES = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created_at {real} NOT NULL,
    response TEXT NOT NULL,      -- the Response object as the API returns it
    input_items TEXT NOT NULL,   -- the request's input items, as input_items lists them
    dialog TEXT NOT NULL,        -- Harmony messages after the preamble (openai_harmony Message dicts)
    open_calls TEXT NOT NULL,    -- call_id -> recipient of calls still waiting for output
    state TEXT NOT NULL DEFAULT '{{}}',  -- the conversation's tool state: sandbox session, MCP listings
    tenant TEXT NOT NULL DEFAULT 'default'  -- whose it is: other tenants never see it
)
"""

# The streamed events of background responses, kept so that a stream can be resumed after any of them.
_EVENTS = """
CREATE TABLE IF NOT EXISTS response_events (
    response_id TEXT NOT NULL,
    sequence_number INTEGER NOT NULL,
    frame {blob} NOT NULL,             -- the event's SSE frame, as it was sent
    PRIMARY KEY (response_id, sequence_number)
)
"""

_CONVERSATIONS = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    metadata TEXT NOT NULL,
    open_calls TEXT NOT NULL DEFAULT '{{}}',  -- call_id -> recipient of calls waiting for their output
    state TEXT NOT NULL DEFAULT '{{}}',       -- tool state: sandbox session, MCP listings, approvals
    tenant TEXT NOT NULL
)
"""

_ITEMS = """
CREATE TABLE IF NOT EXISTS conversation_items (
    seq {serial},  -- the item's place in the conversation
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    item TEXT NOT NULL,      -- the item as the API shows it
    messages TEXT NOT NULL,  -- the Harmony messages it stands for (openai_harmony Message dicts)
    UNIQUE (conversation_id, id)
)
"""

_V1 = (_RESPONSES, _EVENTS, _CONVERSATIONS, _ITEMS)
_SQLITE_TYPES = {"real": "REAL", "blob": "BLOB", "serial": "INTEGER PRIMARY KEY AUTOINCREMENT"}
_POSTGRES_TYPES = {"real": "DOUBLE PRECISION", "blob": "BYTEA", "serial": "BIGSERIAL PRIMARY KEY"}

# Version 2: durable runs on several replicas.
_V2 = _both(
    # Where a response is in its life, which replica runs it (NULL once it ended), and the response it
    # continues: its dialog then holds only the messages it added to its parent's.
    "ALTER TABLE responses ADD COLUMN status TEXT NOT NULL DEFAULT 'completed'",
    "ALTER TABLE responses ADD COLUMN owner TEXT",
    "ALTER TABLE responses ADD COLUMN parent_id TEXT",
    # Deleted or expired while a stored child still builds on its messages: hidden, removed with the last child.
    "ALTER TABLE responses ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS responses_parent ON responses (parent_id) WHERE parent_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS responses_owner ON responses (owner) WHERE owner IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS responses_created ON responses (created_at)",
    # Live gateway processes: each renews its lease; the runs of one whose lease ran out are failed.
    """
    CREATE TABLE IF NOT EXISTS replicas (
        id TEXT PRIMARY KEY,
        heartbeat_at DOUBLE PRECISION NOT NULL
    )
    """,
)

# Version 3: python sessions that follow their conversation across replicas sharing a Docker daemon
# (gateway/sandbox_sessions.py): the session's container and the one replica that holds it now; and
# the prompt tokens of stored messages.
_V3 = _both(
    """
    CREATE TABLE IF NOT EXISTS sandbox_sessions (
        session_id TEXT PRIMARY KEY,   -- the container id the API shows (cntr_...)
        tenant TEXT NOT NULL,
        container TEXT NOT NULL,       -- the Docker container running its kernel
        owner TEXT NOT NULL,           -- the replica holding it
        generation INTEGER NOT NULL,   -- up by one each time it changes hands
        busy_until DOUBLE PRECISION NOT NULL,  -- running code until then (0: idle)
        last_used DOUBLE PRECISION NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS sandbox_sessions_container ON sandbox_sessions (container)",
    # Each stored message's prompt tokens: a continuation renders only its new messages.
    "ALTER TABLE responses ADD COLUMN tokens TEXT",
)

# Version 4: the Files and Containers APIs. File contents live in the files directory (gateway/files/
# blobs.py), named by `blob`; these tables say whose they are. A container file's blob changes when the
# code rewrites it.
_V4 = _both(
    """
    CREATE TABLE IF NOT EXISTS files (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        filename TEXT NOT NULL,
        purpose TEXT NOT NULL,
        bytes BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        blob TEXT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS files_tenant ON files (tenant, created_at)",
    """
    CREATE TABLE IF NOT EXISTS containers (
        id TEXT PRIMARY KEY,            -- also the python session's id (cntr_...)
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        last_active_at DOUBLE PRECISION NOT NULL,
        idle_minutes INTEGER NOT NULL,  -- expires this long after last_active_at
        memory_limit TEXT,
        status TEXT NOT NULL DEFAULT 'running'  -- running | expired
    )
    """,
    "CREATE INDEX IF NOT EXISTS containers_tenant ON containers (tenant, created_at)",
    """
    CREATE TABLE IF NOT EXISTS container_files (
        id TEXT PRIMARY KEY,
        container_id TEXT NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
        tenant TEXT NOT NULL,
        path TEXT NOT NULL,             -- under /mnt/data
        bytes BIGINT NOT NULL,
        source TEXT NOT NULL,           -- user | assistant
        created_at BIGINT NOT NULL,
        blob TEXT NOT NULL,
        file_id TEXT,                   -- the upload it was copied from, if any
        UNIQUE (container_id, path)
    )
    """,
    "CREATE INDEX IF NOT EXISTS container_files_tenant ON container_files (tenant)",
)

# Skills (gateway/skills/): a skill's versions, each a bundle kept as a blob (a zip the gateway wrote).
_V5 = _both(
    """
    CREATE TABLE IF NOT EXISTS skills (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,              -- the default version's
        description TEXT NOT NULL,
        default_version INTEGER NOT NULL,
        latest_version INTEGER NOT NULL,
        created_at BIGINT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS skills_tenant ON skills (tenant, created_at)",
    """
    CREATE TABLE IF NOT EXISTS skill_versions (
        id TEXT PRIMARY KEY,
        skill_id TEXT NOT NULL REFERENCES skills(id) ON DELETE CASCADE,
        tenant TEXT NOT NULL,
        version INTEGER NOT NULL,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        blob TEXT NOT NULL,
        UNIQUE (skill_id, version)
    )
    """,
)

# Version 6: background runs that outlive their replica (gateway/responses/loop/adoption.py): the request the
# run was started with (sealed with the gateway's key: it may hold MCP credentials), and the run's
# checkpoint, written with its events, from which another replica goes on.
_V6 = _both(
    "ALTER TABLE responses ADD COLUMN request TEXT",
    "ALTER TABLE responses ADD COLUMN checkpoint TEXT",
)

# Version 7: the keys every process on the store shares (key_store.py): the sealing key the gateway made
# where none is configured, and the id of the key that seals now.
_V7 = _both("CREATE TABLE IF NOT EXISTS gateway_keys (name TEXT PRIMARY KEY, value TEXT NOT NULL)")

# Version 8: where each stored item is, for `item_reference` input items (response_store.py, `item`): an
# item of a response's output or input, by its id, in the first stored response that held it.
_V8 = _both(
    "CREATE TABLE IF NOT EXISTS response_items (id TEXT PRIMARY KEY, response_id TEXT NOT NULL, tenant TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS response_items_by_response ON response_items (response_id)",
)

# Version 9: vector stores (vector_store_store.py). A store's files are rows of their own (`seq`: the handle of
# the ingestion's claim, the chunks and the attributes); each attribute is a row, so that `filters` are SQL
# that both dialects read alike. Chunks are indexed for words by each dialect's full-text search; their
# vectors (with an embeddings endpoint) are a sqlite-vec table or a pgvector column, made at start-up
# once the configured dimensions are known.
_VECTOR_STORES = """
CREATE TABLE IF NOT EXISTS vector_stores (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    created_at BIGINT NOT NULL,
    last_active_at BIGINT NOT NULL,
    metadata TEXT NOT NULL,
    expires_days INTEGER           -- expires this many days after last_active_at (NULL: never)
)
"""
_VECTOR_STORE_FILES = """
CREATE TABLE IF NOT EXISTS vector_store_files (
    seq {serial},
    vector_store_id TEXT NOT NULL REFERENCES vector_stores(id) ON DELETE CASCADE,
    id TEXT NOT NULL,              -- the file's (Files API) id
    tenant TEXT NOT NULL,
    filename TEXT NOT NULL,
    batch_id TEXT,
    created_at BIGINT NOT NULL,
    status TEXT NOT NULL,          -- in_progress | completed | failed | cancelled
    last_error TEXT,               -- the code and the message, as JSON
    usage_bytes BIGINT NOT NULL DEFAULT 0,
    chunking TEXT NOT NULL,        -- the chunking strategy, as the API shows it
    attributes TEXT NOT NULL,      -- as the API shows them (JSON)
    owner TEXT,                    -- the replica ingesting it
    UNIQUE (vector_store_id, id)
)
"""
_VECTOR_STORE_ATTRIBUTES = """
CREATE TABLE IF NOT EXISTS vector_store_attributes (
    file_seq BIGINT NOT NULL REFERENCES vector_store_files(seq) ON DELETE CASCADE,
    key TEXT NOT NULL,
    text_value TEXT,               -- a string's
    number_value DOUBLE PRECISION, -- a number's, or a boolean's (1, 0)
    is_boolean INTEGER NOT NULL,
    PRIMARY KEY (file_seq, key)
)
"""
_VECTOR_STORE_CHUNKS = """
CREATE TABLE IF NOT EXISTS vector_store_chunks (
    seq {serial},
    file_seq BIGINT NOT NULL REFERENCES vector_store_files(seq) ON DELETE CASCADE,
    vector_store_id TEXT NOT NULL,
    position INTEGER NOT NULL,     -- the chunk's place in its file
    text TEXT NOT NULL
)
"""
_V9_BOTH = (_VECTOR_STORES, _VECTOR_STORE_FILES, _VECTOR_STORE_ATTRIBUTES, _VECTOR_STORE_CHUNKS)
_V9_INDEXES = (
    "CREATE INDEX IF NOT EXISTS vector_stores_tenant ON vector_stores (tenant, created_at)",
    "CREATE INDEX IF NOT EXISTS vector_store_files_pending ON vector_store_files (status) WHERE status = 'in_progress'",
    "CREATE INDEX IF NOT EXISTS vector_store_files_batch ON vector_store_files (batch_id) WHERE batch_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS vector_store_chunks_file ON vector_store_chunks (file_seq)",
    "CREATE INDEX IF NOT EXISTS vector_store_chunks_store ON vector_store_chunks (vector_store_id)",
    """
    CREATE TABLE IF NOT EXISTS vector_store_batches (
        id TEXT PRIMARY KEY,
        vector_store_id TEXT NOT NULL REFERENCES vector_stores(id) ON DELETE CASCADE,
        tenant TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        cancelled INTEGER NOT NULL DEFAULT 0
    )
    """,
)
_V9_SQLITE = (
    *(s.format(**_SQLITE_TYPES) for s in _V9_BOTH),
    *_V9_INDEXES,
    # FTS5 over the chunks' text (external content: the text is stored once), kept in step by triggers,
    # which also fire for the rows a cascade removes.
    "CREATE VIRTUAL TABLE IF NOT EXISTS vector_store_chunks_fts USING fts5(text, content='vector_store_chunks', content_rowid='seq', tokenize='porter unicode61')",
    "CREATE TRIGGER IF NOT EXISTS vector_store_chunks_ai AFTER INSERT ON vector_store_chunks BEGIN INSERT INTO vector_store_chunks_fts(rowid, text) VALUES (new.seq, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS vector_store_chunks_ad AFTER DELETE ON vector_store_chunks BEGIN INSERT INTO vector_store_chunks_fts(vector_store_chunks_fts, rowid, text) VALUES ('delete', old.seq, old.text); END",
)
_V9_POSTGRES = (
    *(s.format(**_POSTGRES_TYPES) for s in _V9_BOTH),
    *_V9_INDEXES,
    "ALTER TABLE vector_store_chunks ADD COLUMN IF NOT EXISTS words tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX IF NOT EXISTS vector_store_chunks_words ON vector_store_chunks USING gin (words)",
)

# Version 10: webhooks (gateway/webhooks/). Endpoints with their signing secrets (sealed), and the outbox:
# one delivery per endpoint and event, written in the transaction that ends the background response, kept
# until delivered or given up, each attempt recorded.
_V10 = _both(
    """
    CREATE TABLE IF NOT EXISTS webhook_endpoints (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        url TEXT NOT NULL,
        event_types TEXT NOT NULL,             -- a JSON list
        secret TEXT NOT NULL,                  -- sealed
        secret_hint TEXT NOT NULL,             -- what listings show of it
        previous_secret TEXT,                  -- sealed; still signs until previous_until (a rotation that keeps it)
        previous_until DOUBLE PRECISION,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS webhook_endpoints_tenant ON webhook_endpoints (tenant, created_at)",
    """
    CREATE TABLE IF NOT EXISTS webhook_deliveries (
        id TEXT PRIMARY KEY,                   -- the webhook-id header, the same on every attempt
        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
        tenant TEXT NOT NULL,
        event_type TEXT NOT NULL,
        payload TEXT NOT NULL,                 -- the body, as every attempt sends it
        created_at DOUBLE PRECISION NOT NULL,  -- when the event happened (the response ended)
        status TEXT NOT NULL,                  -- pending | delivered | given_up
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at DOUBLE PRECISION NOT NULL,
        claimed_by TEXT,                       -- the replica sending it now, until claimed_until
        claimed_until DOUBLE PRECISION,
        ended_at DOUBLE PRECISION
    )
    """,
    "CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS webhook_deliveries_ended ON webhook_deliveries (ended_at) WHERE status <> 'pending'",
    "CREATE INDEX IF NOT EXISTS webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id)",
    """
    CREATE TABLE IF NOT EXISTS webhook_attempts (
        delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
        number INTEGER NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        replica TEXT NOT NULL,
        status_code INTEGER,                   -- the receiver's answer; NULL: none (timeout, refused, blocked)
        error TEXT,
        duration_ms DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (delivery_id, number)
    )
    """,
)

# Version 11: item ids are the tenant's own (Security 5): an id one tenant stored first never keeps another
# tenant from storing, and referring to, an item of the same id.
_V11 = _both(
    "CREATE TABLE response_items_v11 (tenant TEXT NOT NULL, id TEXT NOT NULL, response_id TEXT NOT NULL, PRIMARY KEY (tenant, id))",
    "INSERT INTO response_items_v11 (tenant, id, response_id) SELECT tenant, id, response_id FROM response_items",
    "DROP TABLE response_items",
    "ALTER TABLE response_items_v11 RENAME TO response_items",
    "CREATE INDEX IF NOT EXISTS response_items_by_response ON response_items (response_id)",
)

# Version 12: a container's network policy (files/network.py), its domain secrets sealed.
_V12 = ("ALTER TABLE containers ADD COLUMN network_policy TEXT",)

MIGRATIONS = (
    Migration(1, tuple(s.format(**_SQLITE_TYPES) for s in _V1), tuple(s.format(**_POSTGRES_TYPES) for s in _V1)),
    Migration(2, _V2, _V2),
    Migration(3, _V3, _V3),
    Migration(4, _V4, _V4),
    Migration(5, _V5, _V5),
    Migration(6, _V6, _V6),
    Migration(7, _V7, _V7),
    Migration(8, _V8, _V8),
    Migration(9, _V9_SQLITE, _V9_POSTGRES),
    Migration(10, _V10, _V10),
    Migration(11, _V11, _V11),
    Migration(12, _V12, _V12),
    Migration(13, (*V13_AGENTS, V13_EVENTS.format(**_SQLITE_TYPES)), (*V13_AGENTS, V13_EVENTS.format(**_POSTGRES_TYPES))),
    Migration(14, (*V14_AUTOMATIONS, *V14_VAULTS), (*V14_AUTOMATIONS, *V14_VAULTS)),
)

VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"


async def migrate(tx: Tx, dialect: Dialect, adopt: Callable[[Tx], Awaitable[None]] | None = None) -> None:
    """Apply the migrations a database lacks, in one transaction. `adopt` runs first on a database that
    has no `schema_version` yet (one from before migrations)."""
    await tx.execute(VERSION_TABLE)
    rows = await tx.fetch("SELECT version FROM schema_version")
    version = rows[0][0] if rows else 0
    if not rows:
        await tx.execute("INSERT INTO schema_version (version) VALUES (0)")
        if adopt is not None:
            await adopt(tx)
    if version > MIGRATIONS[-1].version:
        raise StorageError(f"the database's schema (version {version}) is newer than this gateway's")
    for migration in MIGRATIONS:
        if migration.version > version:
            for statement in migration.statements(dialect):
                await tx.execute(statement)
            await tx.execute("UPDATE schema_version SET version = ?", migration.version)
