-- sandlot SQLite schema, version 19: a fork's mark on its snapshot
-- (docs/state.md, "A fork's template goes with its forks"). fork is 1 for
-- the snapshot template a fork made for its contexts to start from (E2B's
-- Sandbox.fork, /v1's fork, fork_sandbox), which the cleanup pass deletes
-- once no context runs on it; 0 for a snapshot the tenant took (whatever
-- its name), which only the tenant deletes. The mark is set when the row
-- is written, never by name, and never changes.
ALTER TABLE snapshots ADD COLUMN fork INTEGER NOT NULL DEFAULT 0;
CREATE INDEX snapshots_fork ON snapshots (created_at) WHERE fork = 1;
