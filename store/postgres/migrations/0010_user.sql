-- Version 10: the end user in the identity (004 §2.1, session key
-- {user_id}:{task_id}). A tenant's key may serve many end users; two who
-- name the same conversation get two contexts. '' is no user: every row
-- written before this version has none and keeps its key. Row-level
-- security stays by tenant: a user is a name inside a tenant, never a wall
-- the database keeps (the tenant's key speaks for all its users).

ALTER TABLE execution_contexts ADD COLUMN user_id text NOT NULL DEFAULT '';

-- At most one active context per identity, the user now part of it. The
-- old index goes in the same transaction, so no moment has neither.
DROP INDEX execution_contexts_active_identity;
CREATE UNIQUE INDEX execution_contexts_active_identity
    ON execution_contexts (tenant_id, user_id, conversation_id, path_id)
    WHERE state IN ('creating', 'ready');

-- Listings of one user's contexts (GET /v1/contexts?userId=).
CREATE INDEX execution_contexts_user
    ON execution_contexts (tenant_id, user_id, conversation_id) WHERE user_id <> '';
