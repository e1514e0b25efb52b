"""Migration 13 (migrations.py): the Agents API's tables, in a module of their own for length."""

from __future__ import annotations

# Version 13: the Agents API (gateway/agents/, storage/agent_store.py): agents, sessions and their state, turns,
# the items turns made, each session's live event log, input events' idempotency keys, and the artifacts hosted
# turns left.
V13_AGENTS = (
    "CREATE TABLE agents (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX agents_tenant ON agents (tenant, created_at)",
    """
    CREATE TABLE agent_sessions (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        last_active_at BIGINT NOT NULL,
        body TEXT NOT NULL,   -- agent snapshot, environment, metadata (secrets sealed)
        status TEXT NOT NULL, -- state's status, counted by the bound on sessions running at once
        state TEXT NOT NULL   -- status, the turn and run going on, what the client owes (agent_store.SessionState)
    )
    """,
    "CREATE INDEX agent_sessions_tenant ON agent_sessions (tenant, created_at)",
    "CREATE INDEX agent_sessions_status ON agent_sessions (status, tenant)",
    "CREATE TABLE agent_turns (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, tenant TEXT NOT NULL, created_at BIGINT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX agent_turns_session ON agent_turns (session_id, created_at)",
    """
    CREATE TABLE agent_items (
        session_id TEXT NOT NULL, id TEXT NOT NULL, turn_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, item TEXT NOT NULL,
        PRIMARY KEY (session_id, id)
    )
    """,
    "CREATE INDEX agent_items_order ON agent_items (session_id, created_at)",
    "CREATE TABLE agent_input_keys (session_id TEXT NOT NULL, key TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (session_id, key))",
    """
    CREATE TABLE agent_artifacts (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL, tenant TEXT NOT NULL, turn_id TEXT NOT NULL, environment_id TEXT NOT NULL,
        path TEXT NOT NULL, size_bytes BIGINT NOT NULL, created_at BIGINT NOT NULL,
        blob TEXT NOT NULL  -- its own copy: kept after the environment's container and its files are gone
    )
    """,
    "CREATE INDEX agent_artifacts_session ON agent_artifacts (session_id, created_at)",
    "CREATE INDEX agent_artifacts_tenant ON agent_artifacts (tenant)",
    # Hosted environments (the id is their container's) and environment templates: their configuration.
    "CREATE TABLE agent_environments (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX agent_environments_tenant ON agent_environments (tenant, created_at)",
    "CREATE TABLE agent_environment_templates "
    "(id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX agent_environment_templates_tenant ON agent_environment_templates (tenant, created_at)",
    # Each run of a turn, as OTLP/JSON (agents/traces.py), with tracing on.
    "CREATE TABLE agent_traces (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, turn_id TEXT NOT NULL, created_at BIGINT NOT NULL, otlp TEXT NOT NULL)",
    "CREATE INDEX agent_traces_session ON agent_traces (session_id, created_at)",
)
V13_EVENTS = """
CREATE TABLE agent_session_events (
    session_id TEXT NOT NULL, seq BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL, frame {blob} NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""

# Version 14: the Agents API's automations (agents/automations.py, storage/automation_store.py): each one's
# configuration and when it is next due, and its invocations. A due automation is claimed by the replica whose
# transaction advances `next_run_at` (rows locked, others skipped), its invocation written in the same
# transaction: each occurrence fires once. An invocation is delivered under a claim that lapses with its replica.
V14_AUTOMATIONS = (
    """
    CREATE TABLE agent_automations (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        status TEXT NOT NULL,               -- active | paused | completed
        pause_reason TEXT,
        next_run_at DOUBLE PRECISION,       -- when it is next due; NULL while paused or completed
        session_id TEXT,                    -- the session it targets or was made by (the list's filter)
        body TEXT NOT NULL                  -- type, name, metadata, schedule, target, created_by
    )
    """,
    "CREATE INDEX agent_automations_tenant ON agent_automations (tenant, created_at)",
    "CREATE INDEX agent_automations_due ON agent_automations (next_run_at)",
    "CREATE INDEX agent_automations_session ON agent_automations (session_id, created_at)",
    """
    CREATE TABLE agent_automation_invocations (
        id TEXT PRIMARY KEY,
        automation_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        status TEXT NOT NULL,               -- queued | completed | failed | skipped
        source TEXT NOT NULL,               -- manual | automation
        scheduled_at BIGINT,
        skip_reason TEXT,
        error TEXT,
        session_id TEXT,                    -- chosen when it is queued (a new session's id too): delivery is idempotent
        turn_id TEXT,                       -- the turn it started, once delivered
        claimed_by TEXT,
        claimed_until DOUBLE PRECISION
    )
    """,
    "CREATE INDEX agent_automation_invocations_list ON agent_automation_invocations (automation_id, created_at)",
    "CREATE INDEX agent_automation_invocations_status ON agent_automation_invocations (status)",
)

# Also version 14: vaults and their credentials (gateway/vaults/, storage/vault_store.py). A credential's secrets
# (tokens, client secret, secret value) are sealed for its tenant in `secret`; `expires_at` is its OAuth access
# token's, and `refresh_claim` / `refresh_until` the claim of the one replica refreshing it.
V14_VAULTS = (
    "CREATE TABLE vaults (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at BIGINT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX vaults_tenant ON vaults (tenant, created_at)",
    """
    CREATE TABLE vault_credentials (
        id TEXT PRIMARY KEY,
        vault_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        body TEXT NOT NULL,                 -- name, metadata, auth as shown (no secret)
        secret TEXT NOT NULL,               -- sealed (Purpose.VAULT_SECRET, the tenant)
        expires_at DOUBLE PRECISION,
        refresh_claim TEXT,
        refresh_until DOUBLE PRECISION
    )
    """,
    "CREATE INDEX vault_credentials_vault ON vault_credentials (vault_id, created_at)",
)
