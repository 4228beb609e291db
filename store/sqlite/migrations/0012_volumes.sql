-- Version 12: volumes (docs/volumes.md). A volume belongs to one tenant;
-- names are unique per tenant. volume_mounts records which contexts
-- mount a volume, where and how: a volume is in use while one of them is
-- not terminated, and DeleteVolume refuses it then. Records are never
-- updated.

CREATE TABLE volumes (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE UNIQUE INDEX volumes_name ON volumes (tenant_id, name);

CREATE TABLE volume_mounts (
    volume_id  TEXT NOT NULL REFERENCES volumes (id) ON DELETE CASCADE,
    context_id TEXT NOT NULL,
    tenant_id  TEXT NOT NULL,
    path       TEXT NOT NULL DEFAULT '',
    read_only  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (volume_id, context_id)
) WITHOUT ROWID;

CREATE INDEX volume_mounts_context ON volume_mounts (context_id);
