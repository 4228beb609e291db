-- Version 17: what a wake from suspension to disk needs (docs/state.md,
-- "What a wake carries", "Wake by port traffic"). env is the environment
-- the context's create gave the sandbox (E2B's envVars), which a wake gives
-- the new sandbox: sealed with the secrets key (AES-256-GCM, the tenant and
-- the context's id as additional data), never in the clear; '': none, or a
-- store without a key. suspend_held is true for a context suspended as
-- E2B's pause, which E2B's traffic wakes only with autoResume; false for
-- the others, which the next call or port request wakes. auto_pause_disk
-- is true for a context whose pause at its expiry (auto_pause_ms) is a
-- suspend to disk (E2B's onTimeout pause with keepMemory: false). The
-- columns are on execution_contexts, whose row-level security by tenant covers
-- them.
-- tenants.idle_suspend_s is the tenant's idle auto-suspend in seconds (0:
-- none of its own; the smallest of the daemon's, the template's and the
-- tenant's wins).
ALTER TABLE execution_contexts ADD COLUMN env text NOT NULL DEFAULT '';
ALTER TABLE execution_contexts ADD COLUMN suspend_held boolean NOT NULL DEFAULT false;
ALTER TABLE execution_contexts ADD COLUMN auto_pause_disk boolean NOT NULL DEFAULT false;
ALTER TABLE tenants ADD COLUMN idle_suspend_s bigint NOT NULL DEFAULT 0;
