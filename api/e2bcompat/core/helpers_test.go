package core_test

import (
	"net/http"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
)

// The tests run the handler over the real contexts.Manager on the memory
// store (e2bcompattest.Env).

const key1, key2 = e2bcompattest.Key1, e2bcompattest.Key2

type (
	env     = e2bcompattest.Env
	created = e2bcompattest.Created
)

// newEnv serves the handler over a manager of fake sandboxes that run
// their commands as host processes (e2bcompattest.Provider).
func newEnv(t *testing.T) *env { return e2bcompattest.NewEnv(t, e2bcompattest.Options{}) }

func decode[T any](t testing.TB, resp *http.Response) T {
	t.Helper()
	return e2bcompattest.Decode[T](t, resp)
}
