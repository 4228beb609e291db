-- Version 7: the cleanup sweep removes audit events older than the
-- retention, oldest first (docs/stores.md, "Audit retention").
CREATE INDEX audit_events_at ON audit_events (at);
