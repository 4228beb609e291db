-- sandlot SQLite schema, version 13: snapshots (docs/state.md). A snapshot
-- is a tenant's template made from a sandbox's filesystem; this row says
-- where it came from and goes with its template (and its tenant). Rows are
-- never updated.

CREATE TABLE snapshots (
    id         TEXT PRIMARY KEY REFERENCES templates (id) ON DELETE CASCADE,
    tenant_id  TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    context_id TEXT NOT NULL,
    template   TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE INDEX snapshots_tenant ON snapshots (tenant_id, created_at);
