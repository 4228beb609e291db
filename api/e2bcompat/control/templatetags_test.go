package control_test

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTemplateTagRoutes: a build's "name:tag" and tags are kept (the
// answer lists them; each resolves to the build, "name" only when the
// build had latest); POST /templates/tags adds tags to a build, GET
// /templates/{id}/tags lists them, DELETE /templates/tags removes them;
// another tenant can neither see, tag nor untag them.
func TestTemplateTagRoutes(t *testing.T) {
	e := newBuildEnv(t)
	build := func(key, body string) (tid string, tags []string) {
		t.Helper()
		r := e.Do("POST", "/v3/templates", strings.NewReader(body), "X-API-KEY", key)
		if r.StatusCode != 202 {
			b, _ := io.ReadAll(r.Body)
			t.Fatalf("request %s: %d %s", body, r.StatusCode, b)
		}
		v := decode[struct {
			TemplateID, BuildID string
			Tags                []string
		}](t, r)
		if r := e.Do("POST", "/v2/templates/"+v.TemplateID+"/builds/"+v.BuildID, strings.NewReader(`{"fromImage":"base-img","steps":[]}`), "X-API-KEY", key); r.StatusCode != 202 {
			t.Fatalf("start: %d", r.StatusCode)
		}
		if st := e.wait(key, v.TemplateID, v.BuildID); st.Status != "ready" {
			t.Fatalf("build %s: %+v", body, st)
		}
		return v.TemplateID, v.Tags
	}
	alias := func(key, ref string) (int, string) {
		t.Helper()
		r := e.Do("GET", "/templates/aliases/"+ref, nil, "X-API-KEY", key)
		if r.StatusCode != 200 {
			return r.StatusCode, ""
		}
		return 200, decode[struct{ TemplateID string }](t, r).TemplateID
	}
	v1, tags := build(key1, `{"name":"app:v1","tags":["prod"]}`)
	if diff := cmp.Diff([]string{"v1", "prod"}, tags); diff != "" {
		t.Errorf("answered tags (-want +got):\n%s", diff)
	}
	if code, id := alias(key1, "app:v1"); code != 200 || id != v1 {
		t.Errorf("app:v1: %d %s, want %s", code, id, v1)
	}
	if code, _ := alias(key1, "app:prod"); code != 200 {
		t.Errorf("app:prod: %d", code)
	}
	// The name exists once any tag was built (Template.exists('app')).
	_, prod := alias(key1, "app:prod")
	if code, id := alias(key1, "app"); code != 200 || (id != v1 && id != prod) {
		t.Errorf("app without a latest build: %d %s, want 200 and the build's %s or %s", code, id, v1, prod)
	}
	if code, _ := alias(key2, "app"); code != 404 {
		t.Errorf("app, another tenant's name: %d, want 404", code)
	}
	if code, _ := alias(key1, "ap"); code != 404 {
		t.Errorf("a prefix of the name: %d, want 404", code)
	}
	latest, tags := build(key1, `{"name":"app"}`)
	if diff := cmp.Diff([]string{"latest"}, tags); diff != "" {
		t.Errorf("default tag (-want +got):\n%s", diff)
	}
	for _, ref := range []string{"app", "app:latest"} {
		if code, id := alias(key1, ref); code != 200 || id != latest {
			t.Errorf("%s: %d %s, want %s", ref, code, id, latest)
		}
	}
	if code, id := alias(key1, "app:v1"); id != v1 {
		t.Errorf("a latest build moved v1: %d %s", code, id)
	}

	// Assign, list, remove.
	r := e.Do("POST", "/templates/tags", strings.NewReader(`{"target":"app:v1","tags":["stable"]}`), "X-API-KEY", key1)
	if r.StatusCode != 201 {
		t.Fatalf("assign: %d", r.StatusCode)
	}
	if got := decode[struct{ Tags []string }](t, r); !cmp.Equal(got.Tags, []string{"stable"}) {
		t.Errorf("assign answer %+v", got)
	}
	list := func(key, ref string) []string {
		t.Helper()
		r := e.Do("GET", "/templates/"+ref+"/tags", nil, "X-API-KEY", key)
		if r.StatusCode != 200 {
			return []string{"status " + itoa(int64(r.StatusCode))}
		}
		var out []string
		for _, ti := range decode[[]map[string]any](t, r) {
			if ti["buildID"] == "" || ti["createdAt"] == "" {
				t.Errorf("tag %v", ti)
			}
			out = append(out, ti["tag"].(string))
		}
		return out
	}
	for _, ref := range []string{"app", v1, "app:prod"} {
		if diff := cmp.Diff([]string{"latest", "prod", "stable", "v1"}, list(key1, ref)); diff != "" {
			t.Errorf("tags of %s (-want +got):\n%s", ref, diff)
		}
	}
	if r := e.Do("DELETE", "/templates/tags", strings.NewReader(`{"name":"app","tags":["stable","prod"]}`), "X-API-KEY", key1); r.StatusCode != 204 {
		t.Errorf("remove: %d", r.StatusCode)
	}
	if diff := cmp.Diff([]string{"latest", "v1"}, list(key1, "app")); diff != "" {
		t.Errorf("tags after remove (-want +got):\n%s", diff)
	}

	// Walls and bad input.
	if got := list(key2, "app"); !cmp.Equal(got, []string{"status 404"}) {
		t.Errorf("tenant 2 lists tenant 1's tags: %v", got)
	}
	if code, _ := alias(key2, "app:v1"); code != 404 {
		t.Errorf("tenant 2 resolves app:v1: %d", code)
	}
	for _, c := range []struct {
		method, body string
		want         int
	}{
		{"POST", `{"target":"app:v1","tags":["mine"]}`, 404},
		{"POST", `{"target":"` + v1 + `","tags":["mine"]}`, 404},
		{"DELETE", `{"name":"app","tags":["v1"]}`, 404},
	} {
		if r := e.Do(c.method, "/templates/tags", strings.NewReader(c.body), "X-API-KEY", key2); r.StatusCode != c.want {
			t.Errorf("tenant 2 %s %s: %d, want %d", c.method, c.body, r.StatusCode, c.want)
		}
	}
	if code, id := alias(key1, "app:v1"); code != 200 || id != v1 {
		t.Errorf("app:v1 after tenant 2's attempts: %d %s", code, id)
	}
	for _, c := range []struct{ method, body string }{
		{"POST", `{"target":"app:v1","tags":["UP"]}`},
		{"POST", `{"target":"app:v1","tags":[]}`},
		{"POST", `{"target":"app:v1","tags":["a:b"]}`},
		{"DELETE", `{"name":"app:v1","tags":["v1"]}`},
		{"POST", `{"target":"app:v1"`},
	} {
		if r := e.Do(c.method, "/templates/tags", strings.NewReader(c.body), "X-API-KEY", key1); r.StatusCode != 400 {
			t.Errorf("%s %s: %d, want 400", c.method, c.body, r.StatusCode)
		}
	}
	for _, body := range []string{`{"name":"app:Bad"}`, `{"name":"app:a:b"}`, `{"name":"app","tags":["../x"]}`, `{"name":"default:v1"}`} {
		if r := e.Do("POST", "/v3/templates", strings.NewReader(body), "X-API-KEY", key1); r.StatusCode != 400 {
			t.Errorf("request %s: %d, want 400", body, r.StatusCode)
		}
	}
}
