package source

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

func newStore(t *testing.T) *image.Store {
	t.Helper()
	testenv.RequireRoot(t)
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testImage(t *testing.T, marker string) v1.Image {
	return imagetest.Image(t,
		imagetest.Layer(t, imagetest.File{Name: "etc/", Type: tar.TypeDir}, imagetest.File{Name: "etc/os-release", Body: "ID=test\n"}),
		imagetest.Layer(t, imagetest.File{Name: "marker", Body: marker}))
}

// registryServer runs go-containerregistry's registry on loopback behind
// basic auth (user:pass), with an optional handler wrapper for attacks.
func registryServer(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(nopLogger()))
	if wrap != nil {
		h = wrap(h)
	}
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// dockerConfig points the default keychain at a docker config holding
// credentials for host.
func dockerConfig(t *testing.T, host, user, pass string) {
	t.Helper()
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(&authn.Basic{Username: "user", Password: "pass"})); err != nil {
		t.Fatal(err)
	}
}

func readMarker(t *testing.T, img image.Image) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(img.LowerDirs()[0], "marker"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPull(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	host := registryServer(t, nil)
	dockerConfig(t, host, "user", "pass")
	img := testImage(t, "v1")
	push(t, host+"/team/app:v1", img)
	want := imagetest.Digest(t, img)

	got, err := Pull(ctx, s, host+"/team/app:v1", PullOptions{Name: "app:v1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want || got.Name != "app:v1" || got.Pinned != host+"/team/app@"+want.String() {
		t.Errorf("Pull = digest %s name %s pinned %s", got.Digest, got.Name, got.Pinned)
	}
	if m := readMarker(t, got.Image); m != "v1" {
		t.Errorf("marker = %q", m)
	}
	for _, ref := range []string{got.Name, got.Pinned} {
		if g, err := s.Get(ctx, ref); err != nil || g.Digest != want {
			t.Errorf("Get(%s) = %v, %v", ref, g.Digest, err)
		}
	}

	// Moving the tag does not move a pin: pulling by digest gets v1.
	push(t, host+"/team/app:v1", testImage(t, "v2"))
	pinned, err := Pull(ctx, s, host+"/team/app@"+want.String(), PullOptions{Name: "app-pinned"})
	if err != nil {
		t.Fatal(err)
	}
	if pinned.Digest != want || readMarker(t, pinned.Image) != "v1" {
		t.Errorf("pull by digest got %s", pinned.Digest)
	}
	// Without a name a pull names nothing; with the name of another
	// image it fails, and the name stays.
	moved, err := Pull(ctx, s, host+"/team/app:v1", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if readMarker(t, moved.Image) != "v2" || moved.Name != "" {
		t.Errorf("pull by tag: %+v, want v2 without a name", moved)
	}
	if refs, _ := s.Refs(ctx); len(refs) != 3 {
		t.Errorf("names after an unnamed pull: %+v, want app:v1, its pin and app-pinned", refs)
	}
	if _, err := Pull(ctx, s, host+"/team/app:v1", PullOptions{Name: "app:v1"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("pull named after another image: %v, want already_exists", err)
	}
	if g, _ := s.Get(ctx, "app:v1"); g.Digest != want {
		t.Errorf("app:v1 moved to %s", g.Digest)
	}
}

func TestPullErrors(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	host := registryServer(t, nil)
	push(t, host+"/app:v1", testImage(t, "v1"))
	arm := imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "x"}))
	cf, _ := arm.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "arm64"
	arm, _ = mutate.ConfigFile(arm, cf)
	push(t, host+"/app:arm", arm)

	dockerConfig(t, host, "user", "wrong")
	if _, err := Pull(ctx, s, host+"/app:v1", PullOptions{}); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("wrong credentials: %v, want unauthenticated", err)
	}
	dockerConfig(t, host, "user", "pass")
	tests := []struct {
		ref  string
		want error
	}{
		{host + "/app:nope", errdefs.ErrNotFound},
		{host + "/app@sha256:" + strings.Repeat("0", 64), errdefs.ErrNotFound},
		{host + "/app:arm", errdefs.ErrInvalidArgument},
		{"Not A Reference", errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			if _, err := Pull(ctx, s, tt.ref, PullOptions{}); !errors.Is(err, tt.want) {
				t.Errorf("Pull(%s) = %v, want %v", tt.ref, err, tt.want)
			}
		})
	}
}

func TestPullIndexTakesAmd64(t *testing.T) {
	s := newStore(t)
	host := registryServer(t, nil)
	dockerConfig(t, host, "user", "pass")
	amd := testImage(t, "amd64")
	arm := testImage(t, "arm64")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	r, _ := name.ParseReference(host + "/multi:latest")
	if err := remote.WriteIndex(r, idx, remote.WithAuth(&authn.Basic{Username: "user", Password: "pass"})); err != nil {
		t.Fatal(err)
	}
	got, err := Pull(context.Background(), s, host+"/multi:latest", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != imagetest.Digest(t, amd) || readMarker(t, got.Image) != "amd64" {
		t.Errorf("got %s", got.Digest)
	}
}

// TestPullTamperedBlob: a registry (or a man in the middle) that serves a
// layer other than the one the manifest names gets nothing stored.
func TestPullTamperedBlob(t *testing.T) {
	s := newStore(t)
	img := testImage(t, "real")
	layers, _ := img.Layers()
	bad, _ := layers[1].Digest()
	evil, _ := imagetest.Layer(t, imagetest.File{Name: "marker", Body: "evil"}).Compressed()
	evilBytes, _ := io.ReadAll(evil)
	host := registryServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+bad.String()) {
				_, _ = w.Write(evilBytes)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	dockerConfig(t, host, "user", "pass")
	push(t, host+"/app:v1", img)
	if _, err := Pull(context.Background(), s, host+"/app:v1", PullOptions{}); err == nil {
		t.Fatal("pull of a tampered layer succeeded")
	}
	if refs, _ := s.Refs(context.Background()); len(refs) != 0 {
		t.Errorf("tampered image named: %v", refs)
	}
}

func TestImportDockerArchive(t *testing.T) {
	s := newStore(t)
	img := testImage(t, "docker")
	path := filepath.Join(t.TempDir(), "image.tar")
	tag, _ := name.NewTag("example.com/team/app:v3")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	got, err := ImportFile(context.Background(), s, path, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "" || got[0].Ref != "example.com/team/app:v3" || readMarker(t, got[0].Image) != "docker" {
		t.Fatalf("import = %+v", got)
	}
	if g, err := s.Get(context.Background(), got[0].Digest.String()); err != nil || g.Digest != got[0].Digest {
		t.Errorf("Get = %v, %v", g.Digest, err)
	}
	// The layers are the image's own: same diff ids.
	l, _ := img.Layers()
	if d, _ := l[1].DiffID(); d != got[0].Layers[1].DiffID {
		t.Errorf("diff id %s, want %s", got[0].Layers[1].DiffID, d)
	}
}

func writeLayout(t *testing.T, img v1.Image, ref string) string {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tarDir writes dir as a tarball, plus any extra entries.
func tarDir(t *testing.T, dir string, extra ...imagetest.File) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "layout.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	for _, e := range extra {
		h := &tar.Header{Name: e.Name, Linkname: e.Link, Typeflag: e.Type, Mode: 0o644, Size: int64(len(e.Body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(tw, e.Body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportOCILayout(t *testing.T) {
	img := testImage(t, "oci")
	dir := writeLayout(t, img, "app:oci")
	t.Run("directory", func(t *testing.T) {
		s := newStore(t)
		got, err := ImportLayout(context.Background(), s, dir, ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Name != "" || got[0].Ref != "app:oci" || got[0].Digest != imagetest.Digest(t, img) {
			t.Fatalf("import = %+v", got)
		}
	})
	t.Run("tarball", func(t *testing.T) {
		s := newStore(t)
		got, err := ImportFile(context.Background(), s, tarDir(t, dir), ImportOptions{Name: "renamed"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Name != "renamed" || readMarker(t, got[0].Image) != "oci" {
			t.Fatalf("import = %+v", got)
		}
	})
}

// TestImportOCILayoutAttacks: an OCI layout tarball whose entries climb out
// or are links to host files imports nothing from outside.
func TestImportOCILayoutAttacks(t *testing.T) {
	img := testImage(t, "oci")
	dir := writeLayout(t, img, "app:oci")
	layers, _ := img.Layers()
	d, _ := layers[1].Digest()
	// Replace one blob by a symlink to a host file with that name.
	if err := os.Remove(filepath.Join(dir, "blobs/sha256", d.Hex)); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(filepath.Dir(host), "escaped")
	rel, _ := filepath.Rel("/", escape)
	path := tarDir(t, dir,
		imagetest.File{Name: "blobs/sha256/" + d.Hex, Type: tar.TypeSymlink, Link: host},
		imagetest.File{Name: "../../../../../../../../" + rel, Body: "x"},
		imagetest.File{Name: "/" + rel, Body: "x"},
	)
	s := newStore(t)
	_, err := ImportFile(context.Background(), s, path, ImportOptions{})
	if err == nil {
		t.Fatal("import with a missing blob succeeded")
	}
	if _, err := os.Stat(escape); !os.IsNotExist(err) {
		t.Errorf("an entry escaped: %v", err)
	}
	if refs, _ := s.Refs(context.Background()); len(refs) != 0 {
		t.Errorf("named: %v", refs)
	}
}

func TestImportNeither(t *testing.T) {
	s := newStore(t)
	path := tarDir(t, t.TempDir(), imagetest.File{Name: "hello", Body: "x"})
	if _, err := ImportFile(context.Background(), s, path, ImportOptions{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("err = %v", err)
	}
}

// TestWallImportArchiveNames: an archive's own names (an OCI index's
// annotations, a docker archive's RepoTags) are input, never store names:
// an import without ImportOptions.Name names nothing, and reports the
// archive's name in Imported.Ref. A Name the caller gives is set only
// when new: over another image's name the import fails with
// already_exists and the name stays. Before, the archive named the
// store (`default` included) and a given Name replaced what it named.
func TestWallImportArchiveNames(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	real, err := s.Put(ctx, testImage(t, "real"), image.PutOptions{Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	evil := testImage(t, "evil")
	docker := filepath.Join(t.TempDir(), "image.tar")
	tag, _ := name.NewTag("python:3.12")
	if err := tarball.WriteToFile(docker, tag, evil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, ref string
	}{
		{"layout annotated default", tarDir(t, writeLayout(t, evil, "default")), "default"},
		{"docker archive", docker, "index.docker.io/library/python:3.12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ImportFile(ctx, s, tc.path, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Name != "" || got[0].Ref != tc.ref || readMarker(t, got[0].Image) != "evil" {
				t.Errorf("import = %+v", got)
			}
			refs, _ := s.Refs(ctx)
			if len(refs) != 1 || refs[0].Name != "default" || refs[0].Digest != real.Digest {
				t.Errorf("the store's names after the import: %+v, want only default -> %s", refs, real.Digest)
			}
		})
	}
	t.Run("a given name over another image's", func(t *testing.T) {
		_, err := ImportFile(ctx, s, docker, ImportOptions{Name: "default"})
		if !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Errorf("import named default: %v, want already_exists", err)
		}
		if d, _ := s.Resolve(ctx, "default"); d != real.Digest {
			t.Errorf("default moved to %s", d)
		}
	})
}
