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
