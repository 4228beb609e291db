package server

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/templates"
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
	tools := map[string]bool{}
	for _, tool := range openAPIRegistry().Tools() {
		tools[tool.Name] = true
	}
	for p, ops := range doc.Paths {
		// A tool's typed operation (POST /v1/tools/run_code) is an
		// instance of POST /v1/tools/{name}, which the server routes.
		if name, ok := strings.CutPrefix(p, "/v1/tools/"); ok && name != "{name}" {
			if !tools[name] {
				t.Errorf("%s: no such tool in the registry", p)
			}
			continue
		}
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

// TestOpenAPILanguages: the documented languages (run_code's, a
// template's kernels) are every language a template can offer, and
// prestart adds ipython.
func TestOpenAPILanguages(t *testing.T) {
	type enum struct {
		Enum  []string `json:"enum"`
		Items struct {
			Enum []string `json:"enum"`
		} `json:"items"`
	}
	var doc struct {
		Components struct {
			Schemas struct {
				RunCodeArgs struct {
					Properties struct{ Language enum } `json:"properties"`
				}
				TemplateSettings struct {
					Properties struct{ Kernels, Prestart enum } `json:"properties"`
				}
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Components.Schemas
	for name, got := range map[string][]string{
		"RunCodeArgs.language":      s.RunCodeArgs.Properties.Language.Enum,
		"TemplateSettings.kernels":  s.TemplateSettings.Properties.Kernels.Items.Enum,
		"TemplateSettings.prestart": s.TemplateSettings.Properties.Prestart.Items.Enum,
	} {
		want := templates.Languages
		if strings.HasSuffix(name, "prestart") {
			want = append(slices.Clone(want), "ipython")
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// TestOpenAPIUserID: wherever the document names a conversation (a
// parameter or a property), it names the user beside it, since the user is
// part of the key (004 §2.1).
func TestOpenAPIUserID(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In string } `json:"parameters"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for p, ops := range doc.Paths {
		for m, op := range ops {
			var conv, user bool
			for _, prm := range op.Parameters {
				conv = conv || prm.Name == "conversationId"
				user = user || prm.Name == "userId" && prm.In == "query"
			}
			if conv && !user {
				t.Errorf("%s %s takes a conversationId and no userId query parameter", strings.ToUpper(m), p)
			}
		}
	}
	for name, s := range doc.Components.Schemas {
		_, conv := s.Properties["conversationId"]
		_, user := s.Properties["userId"]
		if conv && !user {
			t.Errorf("schema %s has conversationId and no userId", name)
		}
	}
}
