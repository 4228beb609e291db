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
