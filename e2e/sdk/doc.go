// Package sdk is the end-to-end suite of sandlot's SDKs (sdk/typescript,
// sdk/python): it checks that the TypeScript and Python types generated
// from api/openapi.json are current and type-check tool calls, builds the
// TypeScript SDK with its pinned toolchain (package-lock.json), starts a
// real `sandlot serve`, and runs each SDK's suite, the framework tools'
// tests and both READMEs' first example against it. `go test ./e2e/sdk`
// runs it; CI has node, npm and Debian's python3 with httpx, pytest and
// mypy (scripts/deps.sh), so a missing one fails rather than skips.
package sdk
