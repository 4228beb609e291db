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
