package e2b_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/e2b"
)

// TestTemplateMapping: the manager names sandlot's default template
// "default"; E2B has no such template, so the provider sends its configured
// E2B template instead. Other names go to E2B as they are.
func TestTemplateMapping(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			TemplateID string `json:"templateID"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, body.TemplateID)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"code":404,"message":"template not found"}`))
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ cfg, spec, want string }{
		{"", "", e2b.DefaultTemplate},
		{"", contexts.DefaultTemplate, e2b.DefaultTemplate},
		{"my-template", contexts.DefaultTemplate, "my-template"},
		{"my-template", "other", "other"},
	} {
		p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, Template: tc.cfg})
		if _, err := p.Create(context.Background(), contexts.Spec{Template: tc.spec}); err == nil {
			t.Fatal("create succeeded against a 404")
		}
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		if last != tc.want {
			t.Fatalf("config %q, spec %q: templateID %q, want %q", tc.cfg, tc.spec, last, tc.want)
		}
	}
}
