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
