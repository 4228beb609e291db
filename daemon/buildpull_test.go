package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
)

// TestWallBuildPull attacks the FROM pull of a tenant's build (serve's
// --build-pull) as the daemon wires it: the operator's docker config
// holds credentials for a private registry. Tenant B's build FROM a
// private image there, without credentials of its own, is refused: a
// tenant's pull is anonymous unless its recipe carries credentials
// (E2B's fromImageRegistry), as tenants' template pulls are. Tenant A,
// whose recipe carries them, builds; and no pull names anything in the
// shared store, so no later FROM finds A's private image by its
// reference. Before, B's pull went out with the operator's credentials
// and succeeded, and every pull left the reference and its pin named in
// the store.
func TestWallBuildPull(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "crun")
	ctx := context.Background()
	reg := templatestest.AuthRegistry(t) // the operator's docker config can pull from it
	private := reg + "/a/private:1"
	templatestest.Push(t, private, templatestest.Image(t, "A-PRIVATE"))

	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := local.New(local.Config{Runtime: "crun", StateDir: filepath.Join(t.TempDir(), "run"), Images: s,
		AgentPath: testenv.AgentBinary(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	for _, id := range []string{"A", "B"} {
		if err := st.CreateTenant(ctx, &tenant.Tenant{ID: id}, tenant.HashKey("k-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st, Images: s})
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Build: Build{Pull: true, PullAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	q, err := buildQueue(cfg, p, cat, g, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || q == nil {
		t.Fatalf("build queue: %v %v", q, err)
	}
	names := func() map[string]string {
		t.Helper()
		refs, err := s.Refs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range refs {
			out[r.Name] = r.Digest.String()
		}
		return out
	}
	before := names()
	build := func(tenantID, name, body string) builds.Snapshot {
		t.Helper()
		rec, err := recipe.ParseE2B([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := q.Request(ctx, tenantID, builds.Request{Spec: templates.BuildSpec{Name: name}, Lease: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Start(ctx, b, rec); err != nil {
			t.Fatalf("start: %v", err)
		}
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if snap := b.Snapshot(0); snap.Status == builds.Ready || snap.Status == builds.Error {
				return snap
			}
		}
		t.Fatal("the build did not end")
		return builds.Snapshot{}
	}

	if snap := build("B", "steal", fmt.Sprintf(`{"fromImage":%q,"steps":[]}`, private)); snap.Status != builds.Error {
		t.Errorf("B's FROM %s without credentials: %+v, want refused", private, snap)
	}
	withAuth := fmt.Sprintf(`{"fromImage":%q,"fromImageRegistry":{"type":"registry","username":"user","password":"pass"},"steps":[]}`, private)
	if snap := build("A", "mine", withAuth); snap.Status != builds.Ready {
		t.Errorf("A's FROM %s with its credentials: %+v", private, snap)
	}
	if after := names(); !maps.Equal(after, before) {
		t.Errorf("the builds' pulls named images in the shared store:\n before %v\n after  %v", before, after)
	}
	if snap := build("B", "steal2", fmt.Sprintf(`{"fromImage":%q,"steps":[]}`, private)); snap.Status != builds.Error {
		t.Errorf("B's FROM %s after A's pull: %+v, want refused", private, snap)
	}
}
