package e2bcompat_test

import (
	"net/http/httptest"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat"
)

// TestHostMatch: which host names the E2B surface takes as sandbox calls
// (envd's and the interpreter's ports only, under the configured domain).
func TestHostMatch(t *testing.T) {
	h := e2bcompat.New(e2bcompat.Config{Domain: "Sandlot.Localhost."})
	none := e2bcompat.New(e2bcompat.Config{})
	for _, c := range []struct {
		host string
		want bool
	}{
		{"49983-0b1e6f2a-9d1c-4c55-8d7e-1f0c2a3b4c5d.sandlot.localhost", true},
		{"49999-abc.sandlot.localhost:3000", true},
		{"49983-ABC.SANDLOT.LOCALHOST.", true},
		{"8080-abc.sandlot.localhost", false},
		{"49983-.sandlot.localhost", false},
		{"49983-abc.x.sandlot.localhost", false},
		{"49983-abc.sandlot.localhost.evil.test", false},
		{"sandlot.localhost", false},
		{"127.0.0.1:3000", false},
	} {
		t.Run(c.host, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/health", nil)
			r.Host = c.host
			if got := h.Match(r); got != c.want {
				t.Errorf("Match = %v, want %v", got, c.want)
			}
			if none.Match(r) {
				t.Error("matched without a domain")
			}
		})
	}
}
