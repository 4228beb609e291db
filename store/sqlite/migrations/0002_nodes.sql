-- sandlot SQLite schema, version 2: every context record is owned by a node
-- (the daemon that created it or took it over), and nodes renew a lease.
-- Records written before this version have no node (''). See docs/stores.md.

ALTER TABLE execution_contexts ADD COLUMN node TEXT NOT NULL DEFAULT '';

-- One row per node; heartbeat_at is its lease (INTEGER unix ms, UTC).
CREATE TABLE nodes (
    id           TEXT PRIMARY KEY,
    heartbeat_at INTEGER NOT NULL
) WITHOUT ROWID;
