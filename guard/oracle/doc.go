// Package oracle holds the guard's test against gitleaks, a test-time
// oracle: samples built with gitleaks' own generators are scanned by
// gitleaks and by the guard, and every secret gitleaks finds in a rule the
// guard covers must lie inside one of the guard's findings.
//
// It is a module of its own (go.mod here, sandlot replaced by the checkout
// two levels up) so that gitleaks and zerolog, its logger, are never in
// sandlot's module graph: the daemon and the client cannot link them, and
// `go list -m all` of sandlot does not list them. `make test` runs it
// after the main module's tests.
package oracle
