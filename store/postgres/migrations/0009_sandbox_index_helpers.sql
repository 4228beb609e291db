-- Version 7: the specifications' index by sandbox and their two helper
-- functions (000 §5.2, §5.3). See docs/stores.md, "Helper functions".

-- Which context owns a sandbox: lookups by sandbox id (an operator holding
-- a sandbox id from the runtime or E2B's console). Rows still creating
-- have no sandbox yet and are left out.
CREATE INDEX execution_contexts_sandbox
    ON execution_contexts (sandbox_id) WHERE sandbox_id <> '';

-- The bodies name the table with this schema, so a caller on another
-- search_path reaches these rows, and no SET clause keeps the planner from
-- inlining get_expired_execution_contexts (its query then uses
-- execution_contexts_expiry like the store's own). Both are SECURITY
-- INVOKER: row-level security applies to the caller as to any statement,
-- so sandlot_app scoped to a tenant touches and lists that tenant's rows
-- only.
DO $$
BEGIN
    -- touch_execution_context extends a context's TTL by the database's
    -- clock: last_used_at = now, expires_at = now + ttl_minutes, as a call
    -- would. It returns the new expires_at, or NULL when the context is not
    -- an active, running one the caller sees (ended, paused, absent, or
    -- another tenant's under row-level security). A context with a fixed
    -- expiry (E2B's timeout) keeps its expires_at, as it does on a call.
    EXECUTE format($f$
        CREATE FUNCTION touch_execution_context(context_id uuid, ttl_minutes integer)
        RETURNS timestamptz LANGUAGE plpgsql AS $body$
        DECLARE
            now_ms     timestamptz := date_trunc('milliseconds', now());
            new_expiry timestamptz;
        BEGIN
            IF ttl_minutes IS NULL OR ttl_minutes <= 0 THEN
                RAISE EXCEPTION 'ttl_minutes must be positive, not %%', ttl_minutes USING ERRCODE = '22023';
            END IF;
            UPDATE %1$I.execution_contexts
               SET last_used_at = now_ms,
                   expires_at = CASE WHEN fixed_expiry THEN expires_at
                                     ELSE now_ms + make_interval(mins => ttl_minutes) END
             WHERE id = context_id AND state IN ('creating', 'ready') AND paused_at IS NULL
            RETURNING expires_at INTO new_expiry;
            RETURN new_expiry;
        END
        $body$;

        -- get_expired_execution_contexts lists the active contexts whose
        -- expires_at is at or before cutoff (default: now), soonest first,
        -- at most max_rows of them (NULL or <= 0: all): what a cleanup pass
        -- ends. The store's ListExpired is this function with its own clock.
        CREATE FUNCTION get_expired_execution_contexts(max_rows integer, cutoff timestamptz DEFAULT now())
        RETURNS SETOF %1$I.execution_contexts LANGUAGE sql STABLE AS $body$
            SELECT * FROM %1$I.execution_contexts
             WHERE state IN ('creating', 'ready') AND expires_at <= cutoff
             ORDER BY expires_at, id
             LIMIT CASE WHEN max_rows > 0 THEN max_rows END
        $body$;
    $f$, current_schema());
END
$$;

-- The daemon's tenant-scoped role may call both; nobody else but the owner.
REVOKE ALL ON FUNCTION touch_execution_context(uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION get_expired_execution_contexts(integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION touch_execution_context(uuid, integer) TO sandlot_app;
GRANT EXECUTE ON FUNCTION get_expired_execution_contexts(integer, timestamptz) TO sandlot_app;
