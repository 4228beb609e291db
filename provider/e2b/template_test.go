package e2b_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
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
// envVars, the labels and the CPU and memory limits as metadata. A
// "sandlot." label goes as "sandlot<Name>": E2B-compatible servers (sandlot
// itself) refuse keys under "sandlot.".
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
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL})
	p.Create(context.Background(), contexts.Spec{TTL: 90 * time.Second, Env: map[string]string{"A": "1"},
		Labels: map[string]string{"sandlot.tenant": "t1"}, Limits: contexts.Limits{CPUs: 1.5, MemoryBytes: 1 << 30}})
	if body.Timeout != 90 || body.EnvVars["A"] != "1" || body.Metadata["sandlotTenant"] != "t1" || body.Metadata["sandlot.tenant"] != "" ||
		body.Metadata["cpuCount"] != "2" || body.Metadata["memoryMB"] != "1024" {
		t.Fatalf("create body %+v", body)
	}
}

// TestSizes: limits pick the smallest E2B template size that gives both
// the CPUs and the memory asked for; a named template is used as is; a
// request no size meets fails before anything is created.
func TestSizes(t *testing.T) {
	sizes := []e2b.Size{{"big", 8, 8192}, {"small", 1, 512}, {"mid", 2, 2048}, {"midcpu", 4, 2048}}
	for _, tc := range []struct {
		name     string
		template string
		limits   contexts.Limits
		want     string // template sent; "" = nothing sent
	}{
		{"no limits", "", contexts.Limits{}, "small"},
		{"memory", "", contexts.Limits{MemoryBytes: 1 << 30}, "mid"},
		{"cpus", "", contexts.Limits{CPUs: 3}, "midcpu"},
		{"both", "", contexts.Limits{CPUs: 2, MemoryBytes: 4 << 30}, "big"},
		{"default name", contexts.DefaultTemplate, contexts.Limits{MemoryBytes: 600 << 20}, "mid"},
		{"named template", "mine", contexts.Limits{CPUs: 64}, "mine"},
		{"too big", "", contexts.Limits{CPUs: 16}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct {
					TemplateID string `json:"templateID"`
				}
				json.NewDecoder(r.Body).Decode(&body)
				got = body.TemplateID
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, Sizes: sizes})
			_, err := p.Create(context.Background(), contexts.Spec{Template: tc.template, Limits: tc.limits})
			if got != tc.want {
				t.Fatalf("template sent %q, want %q (err %v)", got, tc.want, err)
			}
			if tc.want == "" && !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("err = %v, want failed_precondition", err)
			}
		})
	}
}

func TestParseSizes(t *testing.T) {
	got, err := e2b.ParseSizes(" small:1:512, big:8:8192 ,")
	if err != nil || len(got) != 2 || got[0] != (e2b.Size{"small", 1, 512}) || got[1] != (e2b.Size{"big", 8, 8192}) {
		t.Fatalf("ParseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"small", "small:1", ":1:512", "s:0:512", "s:1:-5", "s:x:512", "s:1:512:9"} {
		if _, err := e2b.ParseSizes(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParseSizes(%q) err = %v, want invalid_argument", bad, err)
		}
	}
}
