-- sandlot Postgres schema, version 7: the audit trail is kept for a
-- retention (docs/stores.md, "Audit retention"); the cleanup sweep removes
-- events older than it, oldest first, which this index finds without a
-- scan of the table.
CREATE INDEX audit_events_at ON audit_events (at);
