-- sandlot SQLite schema, version 11: cluster-wide leases (named work that
-- one daemon of those sharing this file does; docs/stores.md, "Leases").
-- expires_at is INTEGER unix ms, UTC, by the clock of the one host that
-- holds the file.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
