-- Version 16: a tenant has several API keys (docs/api.md, "API keys"),
-- each with an id, a name, its prefix and when it was last used; only its
-- SHA-256 (hex) is stored, as before. Row-level security: a statement
-- scoped to a tenant (listing, adding, revoking its keys) reads and writes
-- that tenant's keys only; the lookup by hash, which finds the tenant, is
-- system work. (Version 15 is another migration's.)
ALTER TABLE api_keys DROP CONSTRAINT api_keys_tenant_id_key;
ALTER TABLE api_keys ADD COLUMN id text;
ALTER TABLE api_keys ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN prefix text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
UPDATE api_keys k SET id = 'key_' || substr(md5(random()::text || k.hash), 1, 16), prefix = t.key_prefix
    FROM tenants t WHERE t.id = k.tenant_id;
ALTER TABLE api_keys ALTER COLUMN id SET NOT NULL;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_id UNIQUE (id);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON api_keys TO sandlot_app;
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON api_keys
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
