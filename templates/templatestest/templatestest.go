// Package templatestest makes small runnable images for the tests of
// templates and what takes them: a busybox shell image with a marker file,
// a registry on loopback to pull it from, and archives to import.
package templatestest

import (
	"archive/tar"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// Image is a busybox image (sh and the usual tools under /bin, a user
// 1000 with a home) whose /marker holds marker: run_code "sh" works on it,
// python and node do not exist there.
func Image(t testing.TB, marker string) v1.Image {
	t.Helper()
	bb := testenv.RequireBinary(t, "busybox")
	body, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	files := []imagetest.File{
		{Name: "bin/", Type: tar.TypeDir},
		{Name: "bin/busybox", Body: string(body), Mode: 0o755},
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"},
		{Name: "etc/group", Body: "root:x:0:\nuser:x:1000:\n"},
		{Name: "home/", Type: tar.TypeDir},
		{Name: "home/user/", Type: tar.TypeDir, Mode: 0o700, UID: 1000, GID: 1000},
		{Name: "srv/", Type: tar.TypeDir, Mode: 0o755, UID: 1000, GID: 1000},
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
	}
	for _, tool := range []string{"sh", "echo", "cat", "ls", "id", "pwd", "env", "sleep", "test", "touch"} {
		files = append(files, imagetest.File{Name: "bin/" + tool, Type: tar.TypeSymlink, Link: "busybox"})
	}
	return imagetest.Image(t,
		imagetest.Layer(t, files...),
		imagetest.Layer(t, imagetest.File{Name: "marker", Body: marker}))
}

// Loopback is what a catalog's PullAllow needs for a tenant's pull from
// Registry: the registry listens on 127.0.0.1, one of the host's own
// addresses, which opens only when listed exactly.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// Registry runs go-containerregistry's registry on loopback for the
// test's life and returns its host:port (plain HTTP, no auth).
func Registry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Push writes img to ref (host:port/repo:tag).
func Push(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		t.Fatal(err)
	}
}

// DockerArchive writes img as a docker-archive tarball (`docker save`)
// tagged tag and returns its path.
func DockerArchive(t testing.TB, img v1.Image, tag string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image.tar")
	tg, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, tg, img); err != nil {
		t.Fatal(err)
	}
	return path
}

// Annotated is one image of an OCI layout and the name its index entry
// gives it.
type Annotated struct {
	Image v1.Image
	Ref   string
}

// OCILayout writes an OCI image layout tarball holding imgs, each index
// entry annotated with its Ref (org.opencontainers.image.ref.name and
// io.containerd.image.name, the names importers read), and returns its
// path: what a tenant uploads to POST /v1/templates.
func OCILayout(t testing.TB, imgs ...Annotated) string {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range imgs {
		ann := map[string]string{"org.opencontainers.image.ref.name": a.Ref, "io.containerd.image.name": a.Ref}
		if err := p.AppendImage(a.Image, layout.WithAnnotations(ann)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "layout.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(filepath.Join(dir, "layout"))); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// AuthRegistry is Registry behind basic auth (user:pass), with a docker
// config holding those credentials made the default keychain's
// ($DOCKER_CONFIG) for the test.
func AuthRegistry(t testing.TB) string {
	t.Helper()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("user:pass"))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	if tt, ok := t.(*testing.T); ok {
		tt.Setenv("DOCKER_CONFIG", dir)
	}
	return host
}
