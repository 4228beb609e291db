-- Version 17: a context keeps the environment its create gave the sandbox
-- (E2B's envVars), so that a wake from suspension to disk gives the new
-- sandbox the same (docs/state.md, "What a wake carries"). The value is
-- sealed with the secrets key (AES-256-GCM, the tenant and the context's
-- id as additional data), never in the clear; '': no environment, or a
-- store without a key. The column is on execution_contexts, whose
-- row-level security by tenant covers it.
ALTER TABLE execution_contexts ADD COLUMN env text NOT NULL DEFAULT '';
