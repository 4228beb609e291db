package e2bcompat_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs/errdefstest"
)

// TestErrorEdge walks every category through the E2B wire's two error
// shapes, both written by WriteError: the control plane's {code: status,
// message} and envd's Connect error {code: name, message}. Each shows one
// public sentence without the chain's internals.
func TestErrorEdge(t *testing.T) {
	for _, c := range errdefstest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			w := httptest.NewRecorder()
			e2bcompat.WriteError(w, httptest.NewRequest("GET", "/sandboxes", nil), c.Err)
			var api struct {
				Code    int
				Message string
			}
			if err := json.Unmarshal(w.Body.Bytes(), &api); err != nil {
				t.Fatalf("control plane body %q: %v", w.Body, err)
			}
			if w.Code != c.Status || api.Code != c.Status {
				t.Errorf("control plane: %d, code %d; want %d", w.Code, api.Code, c.Status)
			}
			errdefstest.Check(t, "E2B control plane", c, api.Message)

			r := httptest.NewRequest("POST", "/process.Process/Start", nil)
			r.Header.Set(e2bwire.HeaderSandboxPort, e2bwire.EnvdPort)
			w = httptest.NewRecorder()
			e2bcompat.WriteError(w, r, c.Err)
			var ce struct{ Code, Message string }
			if err := json.Unmarshal(w.Body.Bytes(), &ce); err != nil {
				t.Fatalf("Connect body %q: %v", w.Body, err)
			}
			if w.Code != c.Status || ce.Code != string(c.Code) {
				t.Errorf("Connect: %d %q; want %d %q", w.Code, ce.Code, c.Status, c.Code)
			}
			errdefstest.Check(t, "E2B Connect", c, ce.Message)
		})
	}
}
