-- A sandlot database at schema 19, as a daemon of that version left it (store/postgres TestUpgradeFromEverySchema).
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

-- 0005_templates.sql
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
INSERT INTO schema_migrations (version, name) VALUES (5, '0005_templates.sql');

-- 0006_lifecycle.sql
-- Version 6: a context's lifecycle state in columns of its own
-- (contexts.Lifecycle), where it was "sandlot." keys of metadata. The
-- values rows already hold under those keys are moved by this
-- migration's Go step (lifecycle.go), in the same transaction. The
-- grants and the row-level security policy of execution_contexts cover
-- the new columns as they are.

ALTER TABLE execution_contexts
    ADD COLUMN paused_at      timestamptz,                    -- NULL: running
    ADD COLUMN auto_pause_ms  bigint  NOT NULL DEFAULT 0,
    ADD COLUMN auto_resume_ms bigint  NOT NULL DEFAULT 0,
    ADD COLUMN fixed_expiry   boolean NOT NULL DEFAULT false,
    ADD COLUMN max_executions bigint  NOT NULL DEFAULT 0,
    ADD COLUMN network        jsonb,                          -- NULL: none
    ADD COLUMN template_name  text    NOT NULL DEFAULT '';
INSERT INTO schema_migrations (version, name) VALUES (6, '0006_lifecycle.sql');

-- 0007_audit_at.sql
-- sandlot Postgres schema, version 7: the audit trail is kept for a
-- retention (docs/stores.md, "Audit retention"); the cleanup sweep removes
-- events older than it, oldest first, which this index finds without a
-- scan of the table.
CREATE INDEX audit_events_at ON audit_events (at);
INSERT INTO schema_migrations (version, name) VALUES (7, '0007_audit_at.sql');

-- 0008_tenant_names.sql
-- Version 7: a tenant's name is unique, as its id is, so a name addresses
-- one tenant wherever an id does (`sandlot mcp --tenant default`). An empty
-- name is no name and may repeat. Tenants that share a name keep the oldest
-- one's; the others get their id's first 8 characters appended, before the
-- index can be made.

UPDATE tenants SET name = name || '-' || substr(id, 1, 8)
WHERE name <> '' AND EXISTS (
    SELECT 1 FROM tenants o
    WHERE o.name = tenants.name
      AND (o.created_at < tenants.created_at OR (o.created_at = tenants.created_at AND o.id < tenants.id))
);

CREATE UNIQUE INDEX tenants_name ON tenants (name) WHERE name <> '';
INSERT INTO schema_migrations (version, name) VALUES (8, '0008_tenant_names.sql');

-- 0009_sandbox_index_helpers.sql
-- Version 7: the specifications' index by sandbox and their two helper
-- functions (000 §5.2, §5.3). See docs/stores.md, "Helper functions".

-- Which context owns a sandbox: lookups by sandbox id (an operator holding
-- a sandbox id from the runtime or E2B's console). Rows still creating
-- have no sandbox yet and are left out.
CREATE INDEX execution_contexts_sandbox
    ON execution_contexts (sandbox_id) WHERE sandbox_id <> '';

-- The bodies name the table with this schema, so a caller on another
-- search_path reaches these rows, and no SET clause keeps the planner from
-- inlining get_expired_execution_contexts (its query then uses
-- execution_contexts_expiry like the store's own). Both are SECURITY
-- INVOKER: row-level security applies to the caller as to any statement,
-- so sandlot_app scoped to a tenant touches and lists that tenant's rows
-- only.
DO $$
BEGIN
    -- touch_execution_context extends a context's TTL by the database's
    -- clock: last_used_at = now, expires_at = now + ttl_minutes, as a call
    -- would. It returns the new expires_at, or NULL when the context is not
    -- an active, running one the caller sees (ended, paused, absent, or
    -- another tenant's under row-level security). A context with a fixed
    -- expiry (E2B's timeout) keeps its expires_at, as it does on a call.
    EXECUTE format($f$
        CREATE FUNCTION touch_execution_context(context_id uuid, ttl_minutes integer)
        RETURNS timestamptz LANGUAGE plpgsql AS $body$
        DECLARE
            now_ms     timestamptz := date_trunc('milliseconds', now());
            new_expiry timestamptz;
        BEGIN
            IF ttl_minutes IS NULL OR ttl_minutes <= 0 THEN
                RAISE EXCEPTION 'ttl_minutes must be positive, not %%', ttl_minutes USING ERRCODE = '22023';
            END IF;
            UPDATE %1$I.execution_contexts
               SET last_used_at = now_ms,
                   expires_at = CASE WHEN fixed_expiry THEN expires_at
                                     ELSE now_ms + make_interval(mins => ttl_minutes) END
             WHERE id = context_id AND state IN ('creating', 'ready') AND paused_at IS NULL
            RETURNING expires_at INTO new_expiry;
            RETURN new_expiry;
        END
        $body$;

        -- get_expired_execution_contexts lists the active contexts whose
        -- expires_at is at or before cutoff (default: now), soonest first,
        -- at most max_rows of them (NULL or <= 0: all): what a cleanup pass
        -- ends. The store's ListExpired is this function with its own clock.
        CREATE FUNCTION get_expired_execution_contexts(max_rows integer, cutoff timestamptz DEFAULT now())
        RETURNS SETOF %1$I.execution_contexts LANGUAGE sql STABLE AS $body$
            SELECT * FROM %1$I.execution_contexts
             WHERE state IN ('creating', 'ready') AND expires_at <= cutoff
             ORDER BY expires_at, id
             LIMIT CASE WHEN max_rows > 0 THEN max_rows END
        $body$;
    $f$, current_schema());
END
$$;

-- The daemon's tenant-scoped role may call both; nobody else but the owner.
REVOKE ALL ON FUNCTION touch_execution_context(uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION get_expired_execution_contexts(integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION touch_execution_context(uuid, integer) TO sandlot_app;
GRANT EXECUTE ON FUNCTION get_expired_execution_contexts(integer, timestamptz) TO sandlot_app;
INSERT INTO schema_migrations (version, name) VALUES (9, '0009_sandbox_index_helpers.sql');

-- 0010_user.sql
-- Version 10: the end user in the identity (004 §2.1, session key
-- {user_id}:{task_id}). A tenant's key may serve many end users; two who
-- name the same conversation get two contexts. '' is no user: every row
-- written before this version has none and keeps its key. Row-level
-- security stays by tenant: a user is a name inside a tenant, never a wall
-- the database keeps (the tenant's key speaks for all its users).

ALTER TABLE execution_contexts ADD COLUMN user_id text NOT NULL DEFAULT '';

-- At most one active context per identity, the user now part of it. The
-- old index goes in the same transaction, so no moment has neither.
DROP INDEX execution_contexts_active_identity;
CREATE UNIQUE INDEX execution_contexts_active_identity
    ON execution_contexts (tenant_id, user_id, conversation_id, path_id)
    WHERE state IN ('creating', 'ready');

-- Listings of one user's contexts (GET /v1/contexts?userId=).
CREATE INDEX execution_contexts_user
    ON execution_contexts (tenant_id, user_id, conversation_id) WHERE user_id <> '';
INSERT INTO schema_migrations (version, name) VALUES (10, '0010_user.sql');

-- 0011_leases.sql
-- Version 11: cluster-wide leases. A named piece of work that must run on
-- one daemon of all those sharing this database (the cleanup of a shared
-- provider's contexts: expiry, lost records, reconcile, the warm pool) is
-- done by the holder of its lease. expires_at is written and compared by
-- this database's clock, never a daemon's, so the daemons' clocks need not
-- agree (docs/stores.md, "Leases").

-- A system table like nodes: no row-level security and no grant to
-- sandlot_app, so no tenant-scoped statement can read or take a lease.
CREATE TABLE leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO schema_migrations (version, name) VALUES (11, '0011_leases.sql');

-- 0012_volumes.sql
-- Version 12: volumes (docs/volumes.md). A volume belongs to one tenant;
-- names are unique per tenant. volume_mounts records which contexts
-- mount a volume, where and how: a volume is in use while one of them is
-- not terminated, and DeleteVolume refuses it then. Row-level security: a
-- statement scoped to a tenant reads and writes that tenant's rows only,
-- like execution_contexts. Records are never updated.

CREATE TABLE volumes (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL,
    size_bytes bigint NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX volumes_name ON volumes (tenant_id, name);

CREATE TABLE volume_mounts (
    volume_id  text NOT NULL REFERENCES volumes (id) ON DELETE CASCADE,
    context_id uuid NOT NULL,
    tenant_id  text NOT NULL,
    path       text NOT NULL DEFAULT '',
    read_only  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (volume_id, context_id)
);

CREATE INDEX volume_mounts_context ON volume_mounts (context_id);

GRANT SELECT, INSERT, DELETE ON volumes, volume_mounts TO sandlot_app;
ALTER TABLE volumes ENABLE ROW LEVEL SECURITY;
ALTER TABLE volume_mounts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON volumes
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON volume_mounts
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), ''));
INSERT INTO schema_migrations (version, name) VALUES (12, '0012_volumes.sql');

-- 0013_snapshots.sql
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
INSERT INTO schema_migrations (version, name) VALUES (13, '0013_snapshots.sql');

-- 0014_tenant_guard_entities.sql
-- Version 14: a tenant's choice of the entity types the egress guard finds
-- in its output (docs/guard.md, "People, places and organisations"). NULL:
-- the daemon's default (serve --guard-entities); '' none; else the types
-- joined by commas.
ALTER TABLE tenants ADD COLUMN guard_entities TEXT;
INSERT INTO schema_migrations (version, name) VALUES (14, '0014_tenant_guard_entities.sql');

-- 0015_suspend.sql
-- Version 15: suspend to disk (docs/state.md, "Suspend to disk"). A
-- suspended context has no sandbox; suspend_image is the id of the
-- tenant's template (source "suspend") holding its filesystem, from which
-- the next call wakes it. '': not suspended. The column is on
-- execution_contexts, whose row-level security by tenant covers it.
ALTER TABLE execution_contexts ADD COLUMN suspend_image text NOT NULL DEFAULT '';
INSERT INTO schema_migrations (version, name) VALUES (15, '0015_suspend.sql');

-- 0016_api_keys.sql
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
INSERT INTO schema_migrations (version, name) VALUES (16, '0016_api_keys.sql');

-- 0017_wake.sql
-- Version 17: what a wake from suspension to disk needs (docs/state.md,
-- "What a wake carries", "Wake by port traffic"). env is the environment
-- the context's create gave the sandbox (E2B's envVars), which a wake gives
-- the new sandbox: sealed with the secrets key (AES-256-GCM, the tenant and
-- the context's id as additional data), never in the clear; '': none, or a
-- store without a key. suspend_held is true for a context suspended as
-- E2B's pause, which E2B's traffic wakes only with autoResume; false for
-- the others, which the next call or port request wakes. auto_pause_disk
-- is true for a context whose pause at its expiry (auto_pause_ms) is a
-- suspend to disk (E2B's onTimeout pause with keepMemory: false). The
-- columns are on execution_contexts, whose row-level security by tenant covers
-- them.
-- tenants.idle_suspend_s is the tenant's idle auto-suspend in seconds (0:
-- none of its own; the smallest of the daemon's, the template's and the
-- tenant's wins).
ALTER TABLE execution_contexts ADD COLUMN env text NOT NULL DEFAULT '';
ALTER TABLE execution_contexts ADD COLUMN suspend_held boolean NOT NULL DEFAULT false;
ALTER TABLE execution_contexts ADD COLUMN auto_pause_disk boolean NOT NULL DEFAULT false;
ALTER TABLE tenants ADD COLUMN idle_suspend_s bigint NOT NULL DEFAULT 0;
INSERT INTO schema_migrations (version, name) VALUES (17, '0017_wake.sql');

-- 0018_audit_kind.sql
-- Version 18: an index by (tenant, kind, id) for the audit list of one kind
-- (GET /v1/audit?kind=, ListAuditKind), so a rare or absent kind reads the
-- tenant's events of that kind, newest first, not the audit table every
-- tenant shares (docs/stores.md). Row-level security by tenant is unchanged.
CREATE INDEX audit_events_tenant_kind ON audit_events (tenant_id, kind, id);
INSERT INTO schema_migrations (version, name) VALUES (18, '0018_audit_kind.sql');

-- 0019_snapshot_fork.sql
-- Version 19: a fork's mark on its snapshot (docs/state.md, "A fork's
-- template goes with its forks"). fork is true for the snapshot template a
-- fork made for its contexts to start from (E2B's Sandbox.fork, /v1's
-- fork, fork_sandbox), which the cleanup pass deletes once no context runs
-- on it; false for a snapshot the tenant took (whatever its name), which
-- only the tenant deletes. The mark is set when the row is written, never
-- by name, and never changes (sandlot_app still has no UPDATE on the
-- table). The column is on snapshots, whose row-level security by tenant
-- covers it; the cleanup pass lists the marked rows of every tenant as the
-- system, as its other sweeps do.
ALTER TABLE snapshots ADD COLUMN fork boolean NOT NULL DEFAULT false;
CREATE INDEX snapshots_fork ON snapshots (created_at) WHERE fork;
INSERT INTO schema_migrations (version, name) VALUES (19, '0019_snapshot_fork.sql');

-- The rows (store/storetest/fixture.go).
INSERT INTO tenants (id, name, guard_mode, admin, key_prefix, created_at) VALUES ('11111111-1111-4111-8111-111111111111', 'acme', 'enforce', false, 'sk_fixture_0', to_timestamp(1700000000));
INSERT INTO api_keys (id, hash, tenant_id, name, prefix, created_at) VALUES ('key_fixture000001', '5d1b34d57cdbbbad72541aea8e503447ed73912dfeb389ab098778f65398070f', '11111111-1111-4111-8111-111111111111', 'first', 'sk_fixture_0', to_timestamp(1700000000));
INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, provider, template, created_at, last_used_at, expires_at, execution_count, total_execution_time_ms, metadata, updated_at) VALUES ('22222222-2222-4222-8222-222222222222', '11111111-1111-4111-8111-111111111111', 'conv-1', 'main', 'ready', 'sb-1', 'local', 'default', to_timestamp(1700000000), to_timestamp(1700000000), '2100-01-01T00:00:00Z', 3, 120, '{"team":"blue"}', to_timestamp(1700000000));
INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, reason, created_at, last_used_at, expires_at, terminated_at, updated_at) VALUES ('33333333-3333-4333-8333-333333333333', '11111111-1111-4111-8111-111111111111', 'conv-0', 'main', 'terminated', 'expired', to_timestamp(1700000000), to_timestamp(1700000000), to_timestamp(1700000000), to_timestamp(1700000000), to_timestamp(1700000000));
INSERT INTO audit_events (tenant_id, context_id, kind, detail, at) VALUES ('11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222', 'context.created', '{"template":"default"}', to_timestamp(1700000000));
INSERT INTO audit_events (tenant_id, kind, detail, at) VALUES ('', 'tenant.created', '{}', to_timestamp(1700000001));
UPDATE execution_contexts SET node = 'node-a';
INSERT INTO nodes (id, heartbeat_at) VALUES ('node-a', to_timestamp(1700000000));
INSERT INTO templates (id, tenant_id, name, image, source, settings, created_at) VALUES ('fixturetemplate00001', '11111111-1111-4111-8111-111111111111', 'py312', 'sha256:6482171f705a36c7ec91df1d2b87e6e157bf9760f013d6664944a95a6b62403d', 'docker.io/library/python:3.12-slim', '{"resources":{"memoryBytes":1073741824}}', to_timestamp(1700000000));
