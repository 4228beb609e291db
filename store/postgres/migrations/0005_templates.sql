-- sandlot Postgres schema, version 5: templates (docs/images.md,
-- "Templates"). tenant_id NULL is a public template; names are unique per
-- tenant and among public templates. Row-level security: a statement
-- scoped to a tenant reads that tenant's templates and the public ones,
-- and inserts or deletes only that tenant's; public templates are written
-- by the operator (unscoped statements). Records are never updated.

CREATE TABLE templates (
    id         text PRIMARY KEY,
    tenant_id  text REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL,
    image      text NOT NULL,
    source     text NOT NULL DEFAULT '',
    settings   jsonb NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX templates_name ON templates (COALESCE(tenant_id, ''), name);

GRANT SELECT, INSERT, DELETE ON templates TO sandlot_app;
ALTER TABLE templates ENABLE ROW LEVEL SECURITY;
CREATE POLICY templates_read ON templates FOR SELECT
    USING (tenant_id IS NULL OR tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
CREATE POLICY templates_insert ON templates FOR INSERT
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
CREATE POLICY templates_delete ON templates FOR DELETE
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
