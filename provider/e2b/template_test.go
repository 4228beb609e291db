package e2b_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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

// TestCreateBody: the create call carries the TTL as timeout, the env as
// envVars, the labels and the CPU and memory intent as metadata.
func TestCreateBody(t *testing.T) {
	var body struct {
		TemplateID string            `json:"templateID"`
		Timeout    int64             `json:"timeout"`
		Metadata   map[string]string `json:"metadata"`
		EnvVars    map[string]string `json:"envVars"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, CPU: 2, MemoryMB: 1024})
	p.Create(context.Background(), contexts.Spec{TTL: 90 * time.Second, Env: map[string]string{"A": "1"},
		Labels: map[string]string{"sandlot.tenant": "t1"}})
	if body.Timeout != 90 || body.EnvVars["A"] != "1" || body.Metadata["sandlot.tenant"] != "t1" ||
		body.Metadata["cpuCount"] != "2" || body.Metadata["memoryMB"] != "1024" {
		t.Fatalf("create body %+v", body)
	}
}
