// Package e2b is the end-to-end suite of sandlot's E2B surface: the
// official E2B JavaScript SDKs (e2b, @e2b/code-interpreter; versions
// pinned in package-lock.json) run under node's test runner against a
// sandlot E2B server. `go test ./e2e/e2b` runs it (installing the npm
// packages with `npm ci` when node_modules is missing).
package e2b
