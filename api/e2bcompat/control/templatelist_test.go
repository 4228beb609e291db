package control_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/templates"
)

// builtTemplate records a one-layer image as tenantID's template name.
func (e *buildEnv) builtTemplate(tenantID, name string) templates.Template {
	e.T.Helper()
	tpl, err := e.cat.Build(context.Background(), tenantID, templates.BuildSpec{Name: name}, func(ctx context.Context) (build.Result, error) {
		img, err := e.s.Put(ctx, imagetest.Image(e.T, imagetest.Layer(e.T, imagetest.File{Name: "x", Body: tenantID + name})), image.PutOptions{})
		return build.Result{Image: img}, err
	})
	if err != nil {
		e.T.Fatal(err)
	}
	return tpl
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestTemplateListRoutes: GET /templates and /v2/templates list the
// tenant's templates (and the public and built-in ones) in E2B's Template
// shape; GET /templates/{id} answers TemplateWithBuilds by id or alias;
// DELETE removes the tenant's own. Another tenant's template is a 404 on
// every route, by id or by name, and cannot be deleted.
func TestTemplateListRoutes(t *testing.T) {
	e := newBuildEnv(t)
	a := e.builtTemplate("tenant-1", "app")
	b := e.builtTemplate("tenant-2", "app")

	list := func(key, path string) []map[string]any {
		t.Helper()
		r := e.Do("GET", path, nil, "X-API-KEY", key)
		if r.StatusCode != 200 {
			t.Fatalf("%s: %d", path, r.StatusCode)
		}
		return decode[[]map[string]any](t, r)
	}
	for _, path := range []string{"/templates", "/v2/templates"} {
		var ids []string
		var mine map[string]any
		for _, tpl := range list(key1, path) {
			id, _ := tpl["templateID"].(string)
			ids = append(ids, id)
			if id == a.ID {
				mine = tpl
			}
		}
		if mine == nil || slices.Contains(ids, b.ID) {
			t.Fatalf("%s for tenant 1: %v, want %s and not %s", path, ids, a.ID, b.ID)
		}
		// Every field of E2B's Template schema, and no other.
		want := []string{"aliases", "buildCount", "buildID", "buildStatus", "cpuCount", "createdAt", "createdBy", "diskSizeMB",
			"envdVersion", "lastSpawnedAt", "memoryMB", "names", "public", "spawnCount", "templateID", "updatedAt"}
		if diff := cmp.Diff(want, keysOf(mine)); diff != "" {
			t.Errorf("%s: Template fields (-want +got):\n%s", path, diff)
		}
		if mine["public"] != false || mine["buildStatus"] != "ready" || mine["memoryMB"].(float64) <= 0 ||
			!cmp.Equal(mine["aliases"], []any{"app"}) || !cmp.Equal(mine["names"], []any{"app"}) {
			t.Errorf("%s: %v", path, mine)
		}
		if _, err := uuid.Parse(mine["buildID"].(string)); err != nil {
			t.Errorf("buildID %v: %v", mine["buildID"], err)
		}
	}

	for _, ref := range []string{a.ID, "app"} {
		r := e.Do("GET", "/templates/"+ref, nil, "X-API-KEY", key1)
		if r.StatusCode != 200 {
			t.Fatalf("GET /templates/%s: %d", ref, r.StatusCode)
		}
		got := decode[map[string]any](t, r)
		want := []string{"aliases", "builds", "createdAt", "lastSpawnedAt", "names", "public", "spawnCount", "templateID", "updatedAt"}
		if diff := cmp.Diff(want, keysOf(got)); diff != "" {
			t.Errorf("TemplateWithBuilds fields (-want +got):\n%s", diff)
		}
		builds, _ := got["builds"].([]any)
		if got["templateID"] != a.ID || len(builds) != 1 || builds[0].(map[string]any)["status"] != "ready" {
			t.Errorf("GET /templates/%s: %v", ref, got)
		}
	}
	// Tenant 2 sees its own app by name, never tenant 1's by id.
	if r := e.Do("GET", "/templates/"+a.ID, nil, "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("another tenant's template by id: %d, want 404", r.StatusCode)
	}
	if got := decode[map[string]any](t, e.Do("GET", "/templates/app", nil, "X-API-KEY", key2)); got["templateID"] != b.ID {
		t.Errorf("tenant 2's app: %v, want %s", got["templateID"], b.ID)
	}
	for _, ref := range []string{"nope", "../x", strings.Repeat("a", 300)} {
		if r := e.Do("GET", "/templates/"+ref, nil, "X-API-KEY", key1); r.StatusCode != 404 {
			t.Errorf("GET /templates/%.20s: %d, want 404", ref, r.StatusCode)
		}
	}
	if r := e.Do("GET", "/templates", nil); r.StatusCode != 401 {
		t.Errorf("list without a key: %d, want 401", r.StatusCode)
	}

	// Delete: never another tenant's, nor a built-in; the owner's is gone.
	if r := e.Do("DELETE", "/templates/"+a.ID, nil, "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("another tenant deletes: %d, want 404", r.StatusCode)
	}
	if r := e.Do("DELETE", "/templates/default", nil, "X-API-KEY", key1); r.StatusCode < 400 || r.StatusCode >= 500 {
		t.Errorf("delete the built-in default: %d, want 4xx", r.StatusCode)
	}
	if r := e.Do("DELETE", "/templates/"+a.ID, nil, "X-API-KEY", key1); r.StatusCode != 204 {
		t.Fatalf("delete: %d, want 204", r.StatusCode)
	}
	for _, path := range []string{"/templates/" + a.ID, "/templates/aliases/app"} {
		if r := e.Do("GET", path, nil, "X-API-KEY", key1); r.StatusCode != 404 {
			t.Errorf("GET %s after delete: %d, want 404", path, r.StatusCode)
		}
	}
	if r := e.Do("DELETE", "/templates/"+a.ID, nil, "X-API-KEY", key1); r.StatusCode != 404 {
		t.Errorf("second delete: %d, want 404", r.StatusCode)
	}
	if _, err := e.cat.Resolve(context.Background(), "tenant-2", b.ID); err != nil {
		t.Errorf("tenant 2's template after tenant 1's delete: %v", err)
	}
}

// TestTemplateListPages: limit and nextToken page the template list with
// X-Next-Token, absent on the last page; the pages together hold every
// template once, in order; bad limits and tokens are 400.
func TestTemplateListPages(t *testing.T) {
	e := newBuildEnv(t)
	var want []string
	for _, n := range []string{"p-c", "p-a", "p-e", "p-b", "p-d"} {
		e.builtTemplate("tenant-1", n)
	}
	e.builtTemplate("tenant-2", "p-other")
	all := decode[[]map[string]any](t, e.Do("GET", "/templates", nil, "X-API-KEY", key1))
	for _, tpl := range all {
		want = append(want, tpl["aliases"].([]any)[0].(string))
	}
	if len(want) < 5 || slices.Contains(want, "p-other") {
		t.Fatalf("one page of everything: %v", want)
	}
	for _, path := range []string{"/templates", "/v2/templates"} {
		for _, limit := range []int{1, 2, 3, 100} {
			var got []string
			token, pages := "", 0
			for {
				q := path + "?limit=" + itoa(int64(limit))
				if token != "" {
					q += "&nextToken=" + token
				}
				r := e.Do("GET", q, nil, "X-API-KEY", key1)
				if r.StatusCode != 200 {
					t.Fatalf("%s: %d", q, r.StatusCode)
				}
				page := decode[[]map[string]any](t, r)
				if len(page) > limit {
					t.Fatalf("%s: %d items", q, len(page))
				}
				for _, tpl := range page {
					got = append(got, tpl["aliases"].([]any)[0].(string))
				}
				pages++
				if token = r.Header.Get("X-Next-Token"); token == "" {
					break
				}
				if pages > 20 {
					t.Fatalf("%s: no last page", path)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s limit %d: pages (-want +got):\n%s", path, limit, diff)
			}
			if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
				t.Errorf("%s limit %d: %d pages, want %d", path, limit, pages, wantPages)
			}
		}
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=x", "nextToken=%25%25", "nextToken=bm90aGluZw"} {
		if r := e.Do("GET", "/templates?"+q, nil, "X-API-KEY", key1); r.StatusCode != 400 {
			t.Errorf("?%s: %d, want 400", q, r.StatusCode)
		}
	}
}
