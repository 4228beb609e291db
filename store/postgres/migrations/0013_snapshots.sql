-- sandlot Postgres schema, version 13: snapshots (docs/state.md). A
-- snapshot is a tenant's template made from a sandbox's filesystem; this
-- row says where it came from and goes with its template (and its tenant).
-- Row-level security: a statement scoped to a tenant reads, inserts and
-- deletes only that tenant's rows. Rows are never updated.

CREATE TABLE snapshots (
    id         text PRIMARY KEY REFERENCES templates (id) ON DELETE CASCADE,
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    context_id text NOT NULL,
    template   text NOT NULL,
    bytes      bigint NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX snapshots_tenant ON snapshots (tenant_id, created_at);

GRANT SELECT, INSERT, DELETE ON snapshots TO sandlot_app;
ALTER TABLE snapshots ENABLE ROW LEVEL SECURITY;
CREATE POLICY snapshots_read ON snapshots FOR SELECT
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
CREATE POLICY snapshots_insert ON snapshots FOR INSERT
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
CREATE POLICY snapshots_delete ON snapshots FOR DELETE
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
