-- sandlot SQLite schema, version 15: suspend to disk (docs/state.md,
-- "Suspend to disk"). A suspended context has no sandbox; suspend_image is
-- the id of the tenant's template (source "suspend") holding its filesystem,
-- from which the next call wakes it. '': not suspended.
ALTER TABLE execution_contexts ADD COLUMN suspend_image TEXT NOT NULL DEFAULT '';
