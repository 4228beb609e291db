-- sandlot SQLite schema, version 16: a tenant has several API keys
-- (docs/api.md, "API keys"), each with an id, a name, its prefix and when
-- it was last used; only its SHA-256 is stored, as before. SQLite cannot
-- drop the UNIQUE of tenant_id in place: the table is made again, and the
-- one key of each tenant keeps its hash under a new id. (Version 15 is
-- another migration's.)
CREATE TABLE api_keys_v16 (
    id           TEXT NOT NULL PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE,
    tenant_id    TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         TEXT NOT NULL DEFAULT '',
    prefix       TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
);
INSERT INTO api_keys_v16 (id, hash, tenant_id, prefix, created_at)
    SELECT 'key_' || lower(hex(randomblob(8))), k.hash, k.tenant_id, t.key_prefix, k.created_at
    FROM api_keys k JOIN tenants t ON t.id = k.tenant_id;
DROP TABLE api_keys;
ALTER TABLE api_keys_v16 RENAME TO api_keys;
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);
