package sqlite

// AuditQuery exposes ListAuditKind's statement to the plan tests.
var AuditQuery = auditQuery
