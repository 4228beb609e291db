-- sandlot SQLite schema, version 1. Times are INTEGER unix milliseconds (UTC).

CREATE TABLE execution_contexts (
    id                      TEXT PRIMARY KEY,
    tenant_id               TEXT NOT NULL,
    conversation_id         TEXT NOT NULL,
    path_id                 TEXT NOT NULL,
    state                   TEXT NOT NULL CHECK (state IN ('creating', 'ready', 'terminated', 'error')),
    reason                  TEXT NOT NULL DEFAULT '',
    sandbox_id              TEXT NOT NULL DEFAULT '',
    provider                TEXT NOT NULL DEFAULT '',
    template                TEXT NOT NULL DEFAULT '',
    created_at              INTEGER NOT NULL,
    last_used_at            INTEGER NOT NULL,
    expires_at              INTEGER NOT NULL,
    terminated_at           INTEGER,
    execution_count         INTEGER NOT NULL DEFAULT 0,
    total_execution_time_ms INTEGER NOT NULL DEFAULT 0,
    last_error              TEXT NOT NULL DEFAULT '',
    resource_usage          TEXT NOT NULL DEFAULT '{}',
    metadata                TEXT NOT NULL DEFAULT '{}',
    updated_at              INTEGER NOT NULL
) WITHOUT ROWID;

-- At most one active context per identity: Create relies on it.
CREATE UNIQUE INDEX execution_contexts_active_identity
    ON execution_contexts (tenant_id, conversation_id, path_id)
    WHERE state IN ('creating', 'ready');
CREATE INDEX execution_contexts_expiry
    ON execution_contexts (expires_at) WHERE state IN ('creating', 'ready');
CREATE INDEX execution_contexts_tenant_active
    ON execution_contexts (tenant_id) WHERE state IN ('creating', 'ready');
CREATE INDEX execution_contexts_conversation
    ON execution_contexts (tenant_id, conversation_id);

-- updated_at is set by every UPDATE statement of the store (no trigger: a
-- trigger would cost a second write on the hot RecordExecution path).

CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL DEFAULT '',
    guard_mode TEXT NOT NULL DEFAULT 'enforce',
    admin      INTEGER NOT NULL DEFAULT 0,
    key_prefix TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

-- One key per tenant; only its SHA-256 is stored.
CREATE TABLE api_keys (
    hash       TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL UNIQUE REFERENCES tenants (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
);

CREATE TABLE audit_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL DEFAULT '',
    context_id TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT '{}',
    at         INTEGER NOT NULL
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, id);
