-- sandlot SQLite schema, version 17: what a wake from suspension to disk
-- needs (docs/state.md, "What a wake carries", "Wake by port traffic").
-- env is the environment the context's create gave the sandbox (E2B's
-- envVars), which a wake gives the new sandbox: sealed with the secrets key
-- (AES-256-GCM, the tenant and the context's id as additional data), never
-- in the clear; '': none, or a store without a key. suspend_held is 1 for a
-- context suspended as E2B's pause, which E2B's traffic wakes only with
-- autoResume; 0 for the others, which the next call or port request wakes.
-- auto_pause_disk is 1 for a context whose pause at its expiry (auto_pause_ms)
-- is a suspend to disk (E2B's onTimeout pause with keepMemory: false).
-- tenants.idle_suspend_s is the tenant's idle auto-suspend in seconds (0:
-- none of its own; the smallest of the daemon's, the template's and the
-- tenant's wins).
ALTER TABLE execution_contexts ADD COLUMN env TEXT NOT NULL DEFAULT '';
ALTER TABLE execution_contexts ADD COLUMN suspend_held INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_contexts ADD COLUMN auto_pause_disk INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN idle_suspend_s INTEGER NOT NULL DEFAULT 0;
