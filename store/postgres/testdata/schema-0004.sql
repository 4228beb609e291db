-- A sandlot database at schema 4, as a daemon of that version left it (store/postgres TestUpgradeFromEverySchema).
CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());

-- 0001_init.sql
-- sandlot Postgres schema, version 1. Applied by the owner role (the role the
-- daemon connects as), in the first schema of its search_path, under an
-- advisory lock. See docs/stores.md.

CREATE TABLE execution_contexts (
    id                      uuid PRIMARY KEY,
    tenant_id               text NOT NULL,
    conversation_id         text NOT NULL,
    path_id                 text NOT NULL,
    state                   text NOT NULL CHECK (state IN ('creating', 'ready', 'terminated', 'error')),
    reason                  text NOT NULL DEFAULT '',
    sandbox_id              text NOT NULL DEFAULT '',
    provider                text NOT NULL DEFAULT '',
    template                text NOT NULL DEFAULT '',
    created_at              timestamptz NOT NULL,
    last_used_at            timestamptz NOT NULL,
    expires_at              timestamptz NOT NULL,
    terminated_at           timestamptz,
    execution_count         bigint NOT NULL DEFAULT 0,
    total_execution_time_ms bigint NOT NULL DEFAULT 0,
    last_error              text NOT NULL DEFAULT '',
    resource_usage          jsonb NOT NULL DEFAULT '{}',
    metadata                jsonb NOT NULL DEFAULT '{}',
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- At most one active context per identity. Create relies on it: of two
-- daemons racing to create, one insert wins and the other gets 23505.
CREATE UNIQUE INDEX execution_contexts_active_identity
    ON execution_contexts (tenant_id, conversation_id, path_id)
    WHERE state IN ('creating', 'ready');
-- Expiry cleanup: ListExpired scans active rows by expires_at.
CREATE INDEX execution_contexts_expiry
    ON execution_contexts (expires_at) WHERE state IN ('creating', 'ready');
-- Tenant limits: CountActive of a tenant.
CREATE INDEX execution_contexts_tenant_active
    ON execution_contexts (tenant_id) WHERE state IN ('creating', 'ready');
-- Conversation lookups and listings.
CREATE INDEX execution_contexts_conversation
    ON execution_contexts (tenant_id, conversation_id);

CREATE FUNCTION sandlot_set_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at = now();
    RETURN NEW;
END
$$;

CREATE TRIGGER execution_contexts_updated_at
    BEFORE UPDATE ON execution_contexts
    FOR EACH ROW EXECUTE FUNCTION sandlot_set_updated_at();

CREATE TABLE tenants (
    id         text PRIMARY KEY,
    name       text NOT NULL DEFAULT '',
    guard_mode text NOT NULL DEFAULT 'enforce',
    admin      boolean NOT NULL DEFAULT false,
    key_prefix text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);

-- One key per tenant; only its SHA-256 (hex) is stored.
CREATE TABLE api_keys (
    hash       text PRIMARY KEY,
    tenant_id  text NOT NULL UNIQUE REFERENCES tenants (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  text NOT NULL DEFAULT '',
    context_id text NOT NULL DEFAULT '',
    kind       text NOT NULL,
    detail     jsonb NOT NULL DEFAULT '{}',
    at         timestamptz NOT NULL
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, id);

-- Row-level security. The owner (the daemon's login role, which ran this
-- migration) is exempt because RLS is enabled but not forced: system work
-- (cleanup, reconcile, tenant admin) needs every row. Tenant-scoped
-- statements run as sandlot_app, a NOLOGIN role without BYPASSRLS, with
-- app.tenant_id set for the transaction; the policy then admits only that
-- tenant's rows, and no rows at all when the setting is absent or empty.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sandlot_app') THEN
        CREATE ROLE sandlot_app NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created concurrently by a daemon on another database of this cluster
END
$$;
DO $$
BEGIN
    -- A DBA may have created the role and granted it already (managed
    -- Postgres without CREATEROLE); only grant when needed.
    IF NOT pg_has_role(current_user, 'sandlot_app', 'MEMBER') THEN
        GRANT sandlot_app TO CURRENT_USER;
    END IF;
END
$$;
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO sandlot_app', current_schema());
END
$$;
GRANT SELECT, INSERT, UPDATE ON execution_contexts, audit_events TO sandlot_app;

ALTER TABLE execution_contexts ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON execution_contexts
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON audit_events
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
INSERT INTO schema_migrations (version, name) VALUES (1, '0001_init.sql');

-- 0002_nodes.sql
-- sandlot Postgres schema, version 2: every context record is owned by a
-- node (the daemon that created it or took it over), and nodes renew a
-- lease. Records written before this version have no node (''). See
-- docs/stores.md, "Nodes".

ALTER TABLE execution_contexts ADD COLUMN node text NOT NULL DEFAULT '';

-- A system table like tenants: no row-level security and no grant to
-- sandlot_app, so a tenant-scoped statement can neither read nor forge a
-- lease. Only the owner role (the daemons) reads and writes it.
CREATE TABLE nodes (
    id           text PRIMARY KEY,
    heartbeat_at timestamptz NOT NULL
);
INSERT INTO schema_migrations (version, name) VALUES (2, '0002_nodes.sql');

-- 0003_key_generation.sql
-- Every tenant counts its keys: tokens signed for a tenant name the
-- generation, so rotating the key (SetKey) revokes them.
ALTER TABLE tenants ADD COLUMN key_generation bigint NOT NULL DEFAULT 1;
INSERT INTO schema_migrations (version, name) VALUES (3, '0003_key_generation.sql');

-- 0004_secrets.sql
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
INSERT INTO schema_migrations (version, name) VALUES (4, '0004_secrets.sql');

-- The rows (store/storetest/fixture.go).
INSERT INTO tenants (id, name, guard_mode, admin, key_prefix, created_at) VALUES ('11111111-1111-4111-8111-111111111111', 'acme', 'enforce', false, 'sk_fixture_0', to_timestamp(1700000000));
INSERT INTO api_keys (hash, tenant_id, created_at) VALUES ('5d1b34d57cdbbbad72541aea8e503447ed73912dfeb389ab098778f65398070f', '11111111-1111-4111-8111-111111111111', to_timestamp(1700000000));
INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, provider, template, created_at, last_used_at, expires_at, execution_count, total_execution_time_ms, metadata, updated_at) VALUES ('22222222-2222-4222-8222-222222222222', '11111111-1111-4111-8111-111111111111', 'conv-1', 'main', 'ready', 'sb-1', 'local', 'default', to_timestamp(1700000000), to_timestamp(1700000000), '2100-01-01T00:00:00Z', 3, 120, '{"team":"blue"}', to_timestamp(1700000000));
INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, reason, created_at, last_used_at, expires_at, terminated_at, updated_at) VALUES ('33333333-3333-4333-8333-333333333333', '11111111-1111-4111-8111-111111111111', 'conv-0', 'main', 'terminated', 'expired', to_timestamp(1700000000), to_timestamp(1700000000), to_timestamp(1700000000), to_timestamp(1700000000), to_timestamp(1700000000));
INSERT INTO audit_events (tenant_id, context_id, kind, detail, at) VALUES ('11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222', 'context.created', '{"template":"default"}', to_timestamp(1700000000));
INSERT INTO audit_events (tenant_id, kind, detail, at) VALUES ('', 'tenant.created', '{}', to_timestamp(1700000001));
UPDATE execution_contexts SET node = 'node-a';
INSERT INTO nodes (id, heartbeat_at) VALUES ('node-a', to_timestamp(1700000000));
