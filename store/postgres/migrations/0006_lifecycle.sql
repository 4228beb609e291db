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
