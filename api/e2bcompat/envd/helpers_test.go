package envd_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
)

// The tests run the handler over the real contexts.Manager on the memory
// store (e2bcompattest.Env).

const key1 = e2bcompattest.Key1

type (
	env     = e2bcompattest.Env
	created = e2bcompattest.Created
	apiErr  = e2bcompattest.APIError
)

// newEnv serves the handler over a manager of fake sandboxes that run
// their commands as host processes (e2bcompattest.Provider).
func newEnv(t *testing.T) *env { return e2bcompattest.NewEnv(t, e2bcompattest.Options{}) }

// newManagerEnv serves the handler over a manager configured by cfg on
// contextstest's provider, whose kernel a test may script.
func newManagerEnv(t *testing.T, cfg contexts.Config) (*env, *contextstest.Provider) {
	t.Helper()
	p := contextstest.NewProvider()
	return e2bcompattest.NewEnv(t, e2bcompattest.Options{Manager: cfg, Provider: p}), p
}

func decode[T any](t testing.TB, resp *http.Response) T {
	t.Helper()
	return e2bcompattest.Decode[T](t, resp)
}

// fsCall posts body to the filesystem service's unary method on sb in
// Connect's JSON, with the extra headers given (name, value, ...).
func fsCall(e *env, sb created, method, body string, extra ...string) *http.Response {
	e.T.Helper()
	hdr := append(e.Headers(sb, "49983"), "Content-Type", "application/json", "Connect-Protocol-Version", "1")
	return e.Do("POST", "/filesystem.Filesystem/"+method, strings.NewReader(body), append(hdr, extra...)...)
}
