package docs

// The totals block of requirements.md is computed from its rows and those
// of requirements-issues.md;
// TestRequirements fails while it differs and rewrites it with -update.
//go:generate go test -run TestRequirements -update .
