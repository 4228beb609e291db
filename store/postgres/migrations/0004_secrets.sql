-- sandlot Postgres schema, version 4: tenants' secrets (docs/network.md,
-- "Secrets at the edge"), under the same row-level security as contexts
-- and the audit trail: a statement scoped to a tenant sees and writes
-- only that tenant's secrets.

CREATE TABLE tenant_secrets (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL,
    id         text NOT NULL UNIQUE,
    hosts      jsonb NOT NULL,
    env        text NOT NULL DEFAULT '',
    value      text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_secrets TO sandlot_app;
ALTER TABLE tenant_secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenant_secrets
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
