-- sandlot SQLite schema, version 4: tenants' secrets (docs/network.md,
-- "Secrets at the edge"). id makes the placeholder sandboxes see; hosts is
-- a JSON array of domain patterns; value is the credential itself.

CREATE TABLE tenant_secrets (
    tenant_id  TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    id         TEXT NOT NULL UNIQUE,
    hosts      TEXT NOT NULL,
    env        TEXT NOT NULL DEFAULT '',
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
) WITHOUT ROWID;
