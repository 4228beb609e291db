-- Version 18: an index by (tenant, kind, id) for the audit list of one kind
-- (GET /v1/audit?kind=, ListAuditKind), so a rare or absent kind reads the
-- tenant's events of that kind, newest first, not the audit table every
-- tenant shares (docs/stores.md). Row-level security by tenant is unchanged.
CREATE INDEX audit_events_tenant_kind ON audit_events (tenant_id, kind, id);
