-- Version 6: a context's lifecycle state in columns of its own
-- (contexts.Lifecycle), where it was "sandlot." keys of metadata. The
-- values rows already hold under those keys are moved by this
-- migration's Go step (lifecycle.go), in the same transaction.

ALTER TABLE execution_contexts ADD COLUMN paused_at INTEGER;                     -- NULL: running
ALTER TABLE execution_contexts ADD COLUMN auto_pause_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_contexts ADD COLUMN auto_resume_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_contexts ADD COLUMN fixed_expiry INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_contexts ADD COLUMN max_executions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_contexts ADD COLUMN network TEXT;                          -- policy JSON; NULL: none
ALTER TABLE execution_contexts ADD COLUMN template_name TEXT NOT NULL DEFAULT '';
