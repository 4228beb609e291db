package local

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// newImageProvider is newProvider with an image store and, with host set,
// the host template enabled.
func newImageProvider(t testing.TB, kind string, s *image.Store, host bool) *Provider {
	t.Helper()
	return newProviderWith(t, Config{Runtime: kind, Images: s, HostTemplate: host})
}

// hostUsrLocal names an entry of the host's /usr/local, which no template
// may show.
func hostUsrLocal(t *testing.T) string {
	for _, d := range []string{"/usr/local/bin", "/usr/local/lib", "/usr/local"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			return filepath.Join(d, e.Name())
		}
	}
	t.Fatal("the host's /usr/local is empty: nothing to check the templates hide")
	return ""
}

// TestDefaultTemplate: an empty template is the store's "default" (the
// Debian base): python code runs there, root files are root's, the host's
// /usr/local is not there; the host template exists only when enabled,
// also without /usr/local; an unknown template is not_found.
func TestDefaultTemplate(t *testing.T) {
	s, _ := debiantest.Default(t)
	hostOnly := hostUsrLocal(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			p := newImageProvider(t, kind, s, false)
			c := create(t, p, contexts.Spec{})
			r := runCode(t, c, "python", "import sys, numpy, pandas\nf'{sys.version_info[:2]} {numpy.arange(5).sum()} {pandas.Series([1, 2]).sum()}'")
			if !r.Success || mainText(r) != "'(3, 11) 10 3'" {
				t.Errorf("python on the default template: %+v", r)
			}
			if got := sh(t, c, "cat /etc/debian_version; stat -c %u /usr/bin/python3; ls "+hostOnly+" 2>&1 || true"); !strings.HasPrefix(got.Stdout, "12.") || !strings.Contains(got.Stdout, "\n0\n") || !strings.Contains(got.Stdout, "No such file") {
				t.Errorf("default template root: %q", got.Stdout)
			}
			ctx := context.Background()
			if _, err := p.Create(ctx, contexts.Spec{Template: HostTemplate}); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("host template not enabled: %v, want not_found", err)
			}
			if _, err := p.Create(ctx, contexts.Spec{Template: "no-such-template"}); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("unknown template: %v, want not_found", err)
			}
			if ids, _ := p.List(ctx); len(ids) != 1 {
				t.Errorf("refused creates left sandboxes: %v", ids)
			}
			hp := newImageProvider(t, kind, s, true)
			hc := create(t, hp, contexts.Spec{Template: HostTemplate})
			if got := sh(t, hc, "ls "+hostOnly+" 2>&1; ls /usr/local | wc -l; test -x /usr/bin/python3 && echo usr"); !strings.Contains(got.Stdout, "No such file") || !strings.HasSuffix(got.Stdout, "0\nusr\n") {
				t.Errorf("host template shows /usr/local: %q", got.Stdout)
			}
		})
	}
}

// TestImageGC: GC keeps the layers of an image whose name is gone while a
// sandbox still runs on it, and removes them once the sandbox is gone.
func TestImageGC(t *testing.T) {
	testenv.RequireRoot(t)
	s, err := image.Open(t.TempDir(), image.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	img := imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "marker", Body: "gc\n"}))
	stored, err := s.Put(ctx, img, image.PutOptions{Name: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	layer := stored.Layers[0].Dir
	p := newImageProvider(t, "", s, false)
	c := create(t, p, contexts.Spec{Template: "tiny"})
	if err := s.Untag(ctx, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(layer); err != nil {
		t.Fatalf("GC removed the layer of a live sandbox: %v", err)
	}
	if st, err := c.Stat(ctx, "/marker"); err != nil || st.Size != 3 {
		t.Errorf("the sandbox's image after GC: %+v, %v", st, err)
	}
	if err := p.Destroy(ctx, c.ID()); err != nil {
		t.Fatal(err)
	}
	st, err := p.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(layer); !errors.Is(err, os.ErrNotExist) || st.Layers != 1 {
		t.Errorf("after the sandbox: layer %v, GC removed %d layers; want it gone", err, st.Layers)
	}
}
