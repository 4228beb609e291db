-- sandlot SQLite schema, version 5: templates (docs/images.md,
-- "Templates"). tenant_id NULL is a public template; names are unique per
-- tenant and among public templates. settings is the JSON of
-- templates.Settings. Records are never updated.

CREATE TABLE templates (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT REFERENCES tenants (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    image      TEXT NOT NULL,
    source     TEXT NOT NULL DEFAULT '',
    settings   TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE UNIQUE INDEX templates_name ON templates (COALESCE(tenant_id, ''), name);
