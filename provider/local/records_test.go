package local

import (
	"archive/tar"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
)

// recordsCatalog returns a catalog over a memory store with tenants A and
// B, each with a busybox template whose /marker names it: "app" of A
// pulled from a registry started here with settings, "app" of B imported
// from a docker archive without any.
func recordsCatalog(t *testing.T, settingsA templates.Settings) (c *templates.Catalog, imgs *image.Store, a, b templates.Template) {
	t.Helper()
	ctx := context.Background()
	imgs, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	for _, id := range []string{"A", "B"} {
		if err := st.CreateTenant(ctx, &tenant.Tenant{ID: id}, tenant.HashKey("e2b_p"+id)); err != nil {
			t.Fatal(err)
		}
	}
	c = templates.New(templates.Config{Store: st, Images: imgs, PullAllow: templatestest.Loopback})
	reg := templatestest.Registry(t)
	templatestest.Push(t, reg+"/a/app:1", templatestest.Image(t, "A"))
	if a, err = c.Pull(ctx, "A", reg+"/a/app:1", templates.Spec{Name: "app", Settings: settingsA}, nil); err != nil {
		t.Fatal(err)
	}
	if b, err = c.Import(ctx, "B", templatestest.DockerArchive(t, templatestest.Image(t, "B"), "b/app:1"), templates.Spec{Name: "app"}, nil); err != nil {
		t.Fatal(err)
	}
	return c, imgs, a, b
}

// TestTemplateRecords: a sandbox of a recorded template gets its image,
// env, working directory and start command; a sandbox of the other
// tenant's template of the same name sees only its own image; a template
// that runs as another user of its image runs as that user (root, or
// one its /etc/passwd names), and one whose user the image lacks is
// refused clearly.
func TestTemplateRecords(t *testing.T) {
	settings := templates.Settings{Kernels: []string{"sh"}, Env: map[string]string{"GREETING": "from the template"},
		Workdir: "/srv", StartCmd: "echo started > /tmp/started; sleep 600"}
	c, imgs, a, b := recordsCatalog(t, settings)
	p := newProviderWith(t, Config{Runtime: "crun", Images: imgs, Templates: c})
	ca := create(t, p, contexts.Spec{Template: a.ID, Env: map[string]string{"REQ": "1"}})
	cb := create(t, p, contexts.Spec{Template: b.ID})
	got := sh(t, ca, `cat /marker; echo; echo "$GREETING $REQ"; pwd; for i in 1 2 3 4 5 6 7 8 9 10; do test -f /tmp/started && break; sleep 0.2; done; cat /tmp/started`)
	if want := "A\nfrom the template 1\n/srv\nstarted\n"; got.Stdout != want {
		t.Errorf("template A's sandbox: %q (stderr %q), want %q", got.Stdout, got.Stderr, want)
	}
	got = sh(t, cb, `cat /marker; echo; echo "[$GREETING]"; pwd; ls /tmp`)
	if want := "B\n[]\n/home/user\n"; got.Stdout != want {
		t.Errorf("template B's sandbox: %q, want %q", got.Stdout, want)
	}
	if r := runCode(t, ca, "sh", "echo $GREETING"); strings.TrimSpace(r.Stdout) != "from the template" {
		t.Errorf("run_code sh: %+v", r)
	}

	ctx := context.Background()
	st := memory.New()
	st.CreateTenant(ctx, &tenant.Tenant{ID: "A"}, tenant.HashKey("e2b_pr"))
	rc := templates.New(templates.Config{Store: st, Images: imgs})
	// Templates that run as another user of their image: root, and app
	// (uid 1234 in a layer's /etc/passwd); a user the image lacks is
	// refused clearly.
	base, err := templatestest.Image(t, "A").Layers()
	if err != nil {
		t.Fatal(err)
	}
	withApp := imagetest.Image(t, append(base, imagetest.Layer(t,
		imagetest.File{Name: "etc/", Type: tar.TypeDir},
		imagetest.File{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\napp:x:1234:1235:app:/srv/app:/bin/sh\n"},
		imagetest.File{Name: "etc/group", Body: "root:x:0:\nuser:x:1000:\napp:x:1235:\n"},
		imagetest.File{Name: "srv/", Type: tar.TypeDir, Mode: 0o755},
		imagetest.File{Name: "srv/app/", Type: tar.TypeDir, Mode: 0o700, UID: 1234, GID: 1235},
	))...)
	appImg, err := imgs.Put(ctx, withApp, image.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	record := func(name, user, workdir string) templates.Template {
		t.Helper()
		r, err := st.CreateTemplate(ctx, templates.Template{TenantID: "A", Name: name, Image: appImg.Digest.String(),
			Settings: templates.Settings{User: user, Workdir: workdir, Kernels: []string{"sh"}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	asRoot, asApp, ghost := record("asroot", "root", ""), record("asapp", "app", "/srv/app"), record("ghost", "ghost", "")
	rp := newProviderWith(t, Config{Runtime: "crun", Images: imgs, Templates: rc})
	for _, tc := range []struct {
		tpl  templates.Template
		want string
	}{
		{asRoot, "0 0 root /home/user wrote\n"},
		{asApp, "1234 1235 app /srv/app wrote\n"},
	} {
		c := create(t, rp, contexts.Spec{Template: tc.tpl.ID})
		got := sh(t, c, `touch made && w=wrote; echo "$(id -u) $(id -g) $USER $(pwd) $w"`)
		if got.Stdout != tc.want {
			t.Errorf("template %s: %q (stderr %q), want %q", tc.tpl.Name, got.Stdout, got.Stderr, tc.want)
		}
		if r := runCode(t, c, "sh", "id -u"); tc.tpl.Name == "asapp" && strings.TrimSpace(r.Stdout) != "1234" {
			t.Errorf("run_code as the template's user: %+v", r)
		}
		rp.Destroy(ctx, c.ID())
	}
	if _, err := rp.Create(ctx, contexts.Spec{Template: ghost.ID}); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), `"ghost"`) {
		t.Errorf("a template running as a user its image lacks: %v, want failed_precondition naming the user", err)
	}
	if _, err := rp.Create(ctx, contexts.Spec{Template: "nosuchtemplateid0000"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an unknown template id: %v", err)
	}
	if ids, _ := rp.List(ctx); len(ids) != 0 {
		t.Errorf("refused creates left sandboxes: %v", ids)
	}
}

// TestTemplateLimitsAndPrestart: a tenant's template only lowers the
// daemon's limits; a public one sets them where the request did not;
// prestarted kernels are those the template offers, then its own.
func TestTemplateLimitsAndPrestart(t *testing.T) {
	base := runtime.Limits{MemoryBytes: 2 << 30, PIDs: 256, CPUs: 1, DiskBytes: 512 << 20}
	res := templates.Resources{MemoryBytes: 4 << 30, PIDs: 64, CPUs: 2, DiskBytes: 128 << 20}
	for _, tc := range []struct {
		name   string
		public bool
		req    contexts.Limits
		want   runtime.Limits
	}{
		{"tenant's lowers only", false, contexts.Limits{}, runtime.Limits{MemoryBytes: 2 << 30, PIDs: 64, CPUs: 1, DiskBytes: 128 << 20}},
		{"public sets", true, contexts.Limits{}, runtime.Limits{MemoryBytes: 4 << 30, PIDs: 64, CPUs: 2, DiskBytes: 128 << 20}},
		{"public under the request's own", true, contexts.Limits{MemoryBytes: 2 << 30, CPUs: 1}, runtime.Limits{MemoryBytes: 2 << 30, PIDs: 64, CPUs: 1, DiskBytes: 128 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := &template{public: tc.public, settings: templates.Settings{Resources: res}}
			if d := cmp.Diff(tc.want, tm.limits(base, tc.req)); d != "" {
				t.Errorf("limits (-want +got):\n%s", d)
			}
		})
	}
	tm := &template{settings: templates.Settings{Kernels: []string{"sh", "bash"}, Prestart: []string{"bash"}}}
	if got := tm.prestart([]string{"python"}, []string{"sh"}); !cmp.Equal(got, []string{"sh", "bash"}) {
		t.Errorf("prestart = %v", got)
	}
	if got := (&template{}).prestart([]string{"python"}, nil); !cmp.Equal(got, []string{"python"}) {
		t.Errorf("prestart of a template offering all = %v", got)
	}
}

// TestTemplatePools runs a manager with warm pools for two public
// templates and for two tenants' templates both named app: a request for
// one never gets a pooled sandbox of another, and run_code in a language the template
// lacks is invalid_argument naming it, as is asking an existing context
// for another template (failed_precondition).
func TestTemplatePools(t *testing.T) {
	ctx := context.Background()
	c, imgs, a, b := recordsCatalog(t, templates.Settings{Kernels: []string{"sh"}})
	reg := templatestest.Registry(t)
	templatestest.Push(t, reg+"/p/one:1", templatestest.Image(t, "ONE"))
	templatestest.Push(t, reg+"/p/two:1", templatestest.Image(t, "TWO"))
	one, err := c.Pull(ctx, "", reg+"/p/one:1", templates.Spec{Name: "one", Settings: templates.Settings{Kernels: []string{"sh", "bash"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	two, err := c.Pull(ctx, "", reg+"/p/two:1", templates.Spec{Name: "two", Settings: templates.Settings{Kernels: []string{"sh"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newProviderWith(t, Config{Runtime: "crun", Images: imgs, Templates: c})
	m := contexts.NewManager(memory.New(), p, contexts.Config{Catalog: c, PoolSize: -1,
		PoolSizes: map[string]int{"one": 2, "two": 2, a.ID: 1, b.ID: 1}, PoolPrestart: []string{}, DefaultTemplate: "one"})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := m.Stats()
		if st.PerTemplate[one.ID].PoolSize == 2 && st.PerTemplate[two.ID].PoolSize == 2 && st.PerTemplate[a.ID].PoolSize == 1 && st.PerTemplate[b.ID].PoolSize == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pools never filled: %+v", st.PerTemplate)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run := func(conv, tpl, lang, code string) (*contexts.ExecuteResult, error) {
		return m.Execute(ctx, contexts.Identity{TenantID: "A", ConversationID: conv, PathID: "main"},
			contexts.ExecuteRequest{Language: lang, Code: code, Template: tpl}, nil)
	}
	for i, tc := range []struct{ conv, tpl, want string }{
		{"c1", "two", "TWO"}, {"c2", "one", "ONE"}, {"c3", "two", "TWO"}, {"c4", "", "ONE"}, {"c5", "app", "A"},
	} {
		res, err := run(tc.conv, tc.tpl, "sh", "cat /marker")
		if err != nil || res.Stdout != tc.want {
			t.Errorf("%d: template %q: %+v %v, want %s", i, tc.tpl, res, err, tc.want)
		}
	}
	// Two tenants' templates of one name, each pooled by its id.
	if res, err := m.Execute(ctx, contexts.Identity{TenantID: "B", ConversationID: "c", PathID: "main"},
		contexts.ExecuteRequest{Language: "sh", Code: "cat /marker", Template: "app"}, nil); err != nil || res.Stdout != "B" {
		t.Errorf("B's app: %+v %v, want B", res, err)
	}
	st := m.Stats()
	if hits := st.PerTemplate[a.ID].PoolHits + st.PerTemplate[b.ID].PoolHits; hits != 2 {
		t.Errorf("tenants' pooled templates: %d pool hits, want 2: %+v", hits, st.PerTemplate)
	}
	if hits := st.PerTemplate[one.ID].PoolHits + st.PerTemplate[two.ID].PoolHits; hits < 3 {
		t.Errorf("pool hits %d, want the pooled creates served from the pools: %+v", hits, st.PerTemplate)
	}
	_, err = run("c1", "", "python", "1+1")
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `"two"`) || !strings.Contains(err.Error(), "sh") {
		t.Errorf("python on a template offering sh: %v, want invalid_argument naming the template and its languages", err)
	}
	_, err = run("c1", "one", "sh", "true")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), `"two"`) {
		t.Errorf("asking a context on two for one: %v, want failed_precondition", err)
	}
	if _, err := run("c6", "app", "sh", "true"); err != nil {
		t.Errorf("A's own template: %v", err)
	}
	if _, err := m.Execute(ctx, contexts.Identity{TenantID: "B", ConversationID: "c", PathID: "main"},
		contexts.ExecuteRequest{Language: "sh", Code: "cat /marker", Template: a.ID}, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("B creating on A's template id: %v, want not_found", err)
	}
}
