-- Version 7: the specifications' index by sandbox (000 §5.2), as in
-- Postgres. Their helper functions (touch_execution_context,
-- get_expired_execution_contexts, 000 §5.3) are Postgres's only: SQLite has
-- no stored functions, and the store's Touch and ListExpired do the same
-- in SQL of their own. See docs/stores.md.

-- Not partial, unlike Postgres's: SQLite's planner would not see that
-- "sandbox_id = ?" implies "sandbox_id <> ''" and would never use it.
CREATE INDEX execution_contexts_sandbox ON execution_contexts (sandbox_id);
