package server

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
)

// TestOpenAPIMatchesRoutes: every registered route is documented, every
// documented operation is routed, and the auth requirement agrees.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Security  *[]map[string][]string `json:"security"`
			Responses map[string]any         `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
	var documented, routed []string
	public := map[string]bool{}
	for p, ops := range doc.Paths {
		for m, op := range ops {
			key := strings.ToUpper(m) + " " + p
			documented = append(documented, key)
			if op.Security != nil && len(*op.Security) == 0 {
				public[key] = true
			}
			if len(op.Responses) == 0 {
				t.Errorf("%s documents no responses", key)
			}
		}
	}
	s := New(Config{})
	for _, rt := range s.routes() {
		key := rt.method + " " + rt.path
		routed = append(routed, key)
		if public[key] == rt.auth {
			t.Errorf("%s: auth %v in the server, public %v in the document", key, rt.auth, public[key])
		}
	}
	sort.Strings(documented)
	sort.Strings(routed)
	if d := cmp.Diff(documented, routed); d != "" {
		t.Errorf("documented (-) vs routed (+):\n%s", d)
	}
}
