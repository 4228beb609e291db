package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	testenv.RequireRoot(t) // layers keep their owners
	s, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	baseFiles = []imagetest.File{
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/os-release", Body: "ID=test\n"},
		{Name: "bin/", Type: tar.TypeDir},
		{Name: "bin/tool", Body: "tool", Mode: 0o755},
	}
	appFiles = []imagetest.File{{Name: "app/main", Body: "main", UID: 1000, GID: 1000}}
)

func TestPutGet(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img := imagetest.Image(t, imagetest.Layer(t, baseFiles...), imagetest.Layer(t, appFiles...))
	var phases []string
	got, err := s.Put(ctx, img, PutOptions{Name: "app:v1", Progress: func(p Progress) {
		if p.Phase != "fetch" {
			phases = append(phases, p.Phase)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := imagetest.Digest(t, img); got.Digest != want {
		t.Errorf("digest = %s, want %s", got.Digest, want)
	}
	if diff := cmp.Diff([]string{"unpack", "done", "unpack", "done"}, phases); diff != "" {
		t.Errorf("progress phases (-want +got):\n%s", diff)
	}
	lowers := got.LowerDirs()
	if len(lowers) != 2 {
		t.Fatalf("lowers = %v", lowers)
	}
	if b, err := os.ReadFile(filepath.Join(lowers[0], "app/main")); err != nil || string(b) != "main" {
		t.Errorf("top layer app/main = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(lowers[1], "etc/os-release")); err != nil || string(b) != "ID=test\n" {
		t.Errorf("base layer etc/os-release = %q, %v", b, err)
	}
	for _, ref := range []string{"app:v1", got.Digest.String()} {
		g, err := s.Get(ctx, ref)
		if err != nil {
			t.Fatalf("Get(%s): %v", ref, err)
		}
		if g.Digest != got.Digest || len(g.Layers) != 2 {
			t.Errorf("Get(%s) = %+v", ref, g)
		}
	}
	// The stored image reads back as the same image.
	v, err := s.V1(ctx, got.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if d := imagetest.Digest(t, v); d != got.Digest {
		t.Errorf("V1 digest = %s", d)
	}
	layers, _ := v.Layers()
	if d, _ := layers[1].DiffID(); d != got.Layers[1].DiffID {
		t.Errorf("V1 layer diff id = %s", d)
	}
	// Put again: everything cached.
	phases = nil
	if _, err := s.Put(ctx, img, PutOptions{Progress: func(p Progress) { phases = append(phases, p.Phase) }}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cached", "cached"}, phases); diff != "" {
		t.Errorf("second put phases (-want +got):\n%s", diff)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(nope) = %v, want not found", err)
	}
}

func TestPutConcurrentSameImage(t *testing.T) {
	s := newStore(t)
	img := imagetest.Image(t, imagetest.Layer(t, baseFiles...))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put(context.Background(), img, PutOptions{Name: "same"})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(s.Root(), "layers/sha256"))
	if len(ents) != 1 {
		t.Errorf("%d layer dirs, want 1", len(ents))
	}
}

// TestPutRejects feeds images whose content lies about itself or attacks
// the unpacker: nothing of them may be left in the store.
func TestPutRejects(t *testing.T) {
	good := imagetest.Layer(t, baseFiles...)
	tests := []struct {
		name string
		img  func(t *testing.T) v1.Image
		want error
	}{
		{
			name: "dotdot entry",
			img: func(t *testing.T) v1.Image {
				return imagetest.Image(t, good, imagetest.Layer(t, imagetest.File{Name: "../../escape", Body: "x"}))
			},
			want: errdefs.ErrInvalidArgument,
		},
		{
			name: "diff id not the layer's",
			img: func(t *testing.T) v1.Image {
				img := imagetest.Image(t, good)
				cf, _ := img.ConfigFile()
				cf = cf.DeepCopy()
				other, _ := imagetest.Layer(t, appFiles...).DiffID()
				cf.RootFS.DiffIDs[0] = other
				img, err := mutate.ConfigFile(img, cf)
				if err != nil {
					t.Fatal(err)
				}
				return img
			},
			want: errdefs.ErrInvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Put(context.Background(), tt.img(t), PutOptions{Name: "bad"})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Put = %v, want %v", err, tt.want)
			}
			if _, err := s.Get(context.Background(), "bad"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("bad image is named: %v", err)
			}
			tmp, _ := os.ReadDir(filepath.Join(s.Root(), "tmp"))
			if len(tmp) != 0 {
				t.Errorf("staging left behind: %v", tmp)
			}
		})
	}
}

func TestRefs(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img, err := s.Put(ctx, imagetest.Image(t, imagetest.Layer(t, baseFiles...)), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default", "docker.io/library/debian:bookworm", "t/acme/app:v1", "repo@sha256:abc"} {
		if err := s.Tag(ctx, name, img.Digest); err != nil {
			t.Errorf("Tag(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "../x", "-x", "a b", "a\nb", string(make([]byte, 300))} {
		if err := s.Tag(ctx, name, img.Digest); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Tag(%q) = %v, want invalid argument", name, err)
		}
	}
	missing := v1.Hash{Algorithm: "sha256", Hex: "0000000000000000000000000000000000000000000000000000000000000000"}
	if err := s.Tag(ctx, "x", missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Tag(missing) = %v, want not found", err)
	}
	refs, err := s.Refs(ctx)
	if err != nil || len(refs) != 4 {
		t.Fatalf("Refs = %v, %v", refs, err)
	}
	if err := s.Untag(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if err := s.Untag(ctx, "default"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Untag = %v", err)
	}
}

func TestGC(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	base := imagetest.Layer(t, baseFiles...)
	a, err := s.Put(ctx, imagetest.Image(t, base, imagetest.Layer(t, appFiles...)), PutOptions{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Put(ctx, imagetest.Image(t, base, imagetest.Layer(t, imagetest.File{Name: "b", Body: "b"})), PutOptions{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.GC(ctx)
	if err != nil || st.Blobs != 0 || st.Layers != 0 {
		t.Fatalf("GC with everything named = %+v, %v", st, err)
	}
	if err := s.Untag(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	// Kept by the caller (a sandbox still runs it): nothing goes.
	if st, err := s.GC(ctx, b.Digest); err != nil || st.Layers != 0 {
		t.Fatalf("GC keeping b = %+v, %v", st, err)
	}
	st, err = s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// b's own layer, its blob, config and manifest go; the shared base stays.
	if st.Layers != 1 || st.Blobs != 3 || st.FreedBytes <= 0 {
		t.Errorf("GC = %+v, want 1 layer and 3 blobs removed", st)
	}
	if _, err := os.Stat(b.Layers[1].Dir); !os.IsNotExist(err) {
		t.Errorf("b's top layer still there: %v", err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range got.Layers {
		if _, err := os.Stat(l.Dir); err != nil {
			t.Errorf("a's layer %s: %v", l.DiffID, err)
		}
	}
	if got.Layers[0].Dir != a.Layers[0].Dir {
		t.Error("base layer moved")
	}
}

// TestGCWaitsForLeases checks the race GC must not lose: content written
// under a lease and not yet named survives a GC that runs meanwhile.
func TestGCWaitsForLeases(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	lease, err := s.Lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Put(ctx, imagetest.Image(t, imagetest.Layer(t, baseFiles...)), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.GC(short); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("GC under a lease = %v, want unavailable", err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.GC(ctx); done <- err }()
	if err := s.Tag(ctx, "named", img.Digest); err != nil { // still under the lease
		t.Fatal(err)
	}
	lease.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "named"); err != nil {
		t.Errorf("image named under the lease was collected: %v", err)
	}
}

func TestNewLayer(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	raw := imagetest.Tar(t, imagetest.File{Name: "x", Body: "staged"})
	l, err := s.NewLayer(ctx, func(w io.Writer) error { _, err := w.Write(raw); return err })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want, _, _ := v1.SHA256(bytesReader(raw))
	if d, _ := l.DiffID(); d != want {
		t.Errorf("diff id = %s, want %s", d, want)
	}
	img, err := s.Put(ctx, imagetest.Image(t, l), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(img.Layers[0].Dir, "x")); err != nil || string(b) != "staged" {
		t.Errorf("x = %q, %v", b, err)
	}
}

// TestNewTarLayer: a local layer is hashed, kept uncompressed and unpacked
// in one pass; Put then only writes the manifest. A tarball the unpacker
// refuses, or a writer that fails, leaves nothing in the store.
func TestNewTarLayer(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	raw := imagetest.Tar(t, imagetest.File{Name: "d/", Type: tar.TypeDir}, imagetest.File{Name: "d/x", Body: "streamed", UID: 1000, GID: 1000})
	l, err := s.NewTarLayer(ctx, func(w io.Writer) error { _, err := w.Write(raw); return err })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want, _, _ := v1.SHA256(bytesReader(raw))
	d, _ := l.Digest()
	id, _ := l.DiffID()
	mt, _ := l.MediaType()
	if d != want || id != want || mt != "application/vnd.oci.image.layer.v1.tar" {
		t.Errorf("digest %s diff id %s media type %s, want %s twice and an uncompressed layer", d, id, mt, want)
	}
	if !s.HasBlob(want) || !s.HasLayer(want) {
		t.Fatalf("blob %v layer %v: want both stored before Put", s.HasBlob(want), s.HasLayer(want))
	}
	var phases []string
	img, err := s.Put(ctx, imagetest.Image(t, l), PutOptions{Name: "local", Progress: func(p Progress) { phases = append(phases, p.Phase) }})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cached"}, phases); diff != "" {
		t.Errorf("Put phases (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(filepath.Join(img.Layers[0].Dir, "d/x"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(img.Layers[0].Dir, "d/x")); string(b) != "streamed" || fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Errorf("d/x = %q owned by %d", b, fi.Sys().(*syscall.Stat_t).Uid)
	}
	if err := l.Close(); err != nil || !s.HasBlob(want) {
		t.Errorf("Close removed the stored blob: %v", err)
	}

	bad := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"dotdot entry", func(w io.Writer) error {
			_, err := w.Write(imagetest.Tar(t, imagetest.File{Name: "../escape", Body: "x"}))
			return err
		}},
		{"writer fails", func(w io.Writer) error {
			w.Write(raw[:512])
			return errors.New("mmdebstrap died")
		}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			before := storeEntries(t, s)
			if _, err := s.NewTarLayer(ctx, tc.write); err == nil {
				t.Fatal("NewTarLayer succeeded")
			}
			if diff := cmp.Diff(before, storeEntries(t, s)); diff != "" {
				t.Errorf("store changed (-before +after):\n%s", diff)
			}
		})
	}
}

// storeEntries lists blobs, layers and tmp entries.
func storeEntries(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, d := range []string{"blobs/sha256", "layers/sha256", "tmp"} {
		ents, err := os.ReadDir(filepath.Join(s.Root(), d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			out = append(out, d+"/"+e.Name())
		}
	}
	return out
}

// TestGCTmpGrace: GC leaves what tmp/ got within TmpGrace (an E2B build's
// uploaded context waiting for its start, which holds no lease) and
// removes what is older.
func TestGCTmpGrace(t *testing.T) {
	s := newStore(t)
	tmp := filepath.Join(s.Root(), "tmp")
	for _, name := range []string{"build-fresh", "build-old"} {
		if err := os.MkdirAll(filepath.Join(tmp, name, "src"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, name, "src", "app.py"), []byte("print(1)\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-TmpGrace - time.Minute)
	if err := os.Chtimes(filepath.Join(tmp, "build-old"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "build-fresh", "src", "app.py")); err != nil {
		t.Errorf("a fresh build context was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "build-old")); !os.IsNotExist(err) {
		t.Errorf("an old leftover stayed: %v", err)
	}
}

// TestWallPutNameOnlyWhenNew: Put names an image only when the name is
// new (or names that image already), atomically: a name that points at
// another image fails the Put with already_exists and stays where it
// was, and of several Puts racing for one new name exactly one wins.
// Moving a name is Tag's, the operator's. Before, Put re-pointed any
// name it was given, so whatever reached Put with a tenant's name (an
// import's annotations) moved the daemon's `default`.
func TestWallPutNameOnlyWhenNew(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	real, err := s.Put(ctx, imagetest.Image(t, imagetest.Layer(t, baseFiles...)), PutOptions{Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	evil := imagetest.Image(t, imagetest.Layer(t, appFiles...))
	if _, err := s.Put(ctx, evil, PutOptions{Name: "default"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Put over a name of another image: %v, want already_exists", err)
	}
	if d, err := s.Resolve(ctx, "default"); err != nil || d != real.Digest {
		t.Errorf("default = %s %v, want %s", d, err, real.Digest)
	}
	if _, err := s.Put(ctx, imagetest.Image(t, imagetest.Layer(t, baseFiles...)), PutOptions{Name: "default"}); err != nil {
		t.Errorf("Put of the image the name has: %v", err)
	}

	const racers = 8
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		img := imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "n", Body: string(rune('a' + i))}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put(ctx, img, PutOptions{Name: "contested"})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, errdefs.ErrAlreadyExists):
			t.Errorf("a racing Put: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d Puts named the contested name, want 1: %v", won, errs)
	}
}

// unheld is a layer whose digests are known but whose bytes its image
// does not have.
type unheld struct{ v1.Layer }

func (unheld) Compressed() (io.ReadCloser, error) {
	return nil, errors.New("the blob is not in the archive")
}

// TestWallPutUntrusted: an untrusted image (a tenant's) proves each
// layer's content. Naming a stored layer's digests without its bytes, or
// pairing a blob of its own with a stored tree's diff id, is
// invalid_argument; the same tar compressed otherwise still shares the
// stored tree. A trusted Put (the operator's) keeps taking a stored
// layer as it is. Before, every Put took what the store had by digest.
func TestWallPutUntrusted(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	files := []imagetest.File{{Name: "secret", Body: "A-SECRET"}}
	layer := imagetest.Layer(t, files...)
	if _, err := s.Put(ctx, imagetest.Image(t, layer), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	named := imagetest.Image(t, unheld{layer})
	if _, err := s.Put(ctx, named, PutOptions{Untrusted: true}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("untrusted image naming a stored layer without its bytes: %v, want invalid_argument", err)
	}
	if _, err := s.Put(ctx, named, PutOptions{}); err != nil {
		t.Errorf("trusted Put of a stored layer: %v", err)
	}

	diffID, _ := layer.DiffID()
	lying := imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "mine", Body: "B"}))
	cf, _ := lying.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs = []v1.Hash{diffID}
	lying, err := mutate.ConfigFile(lying, cf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, lying, PutOptions{Untrusted: true}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("untrusted image claiming a stored tree's diff id: %v, want invalid_argument", err)
	}

	raw := imagetest.Tar(t, files...)
	plain := static.NewLayer(raw, types.OCIUncompressedLayer)
	if got, err := s.Put(ctx, imagetest.Image(t, plain), PutOptions{Untrusted: true}); err != nil {
		t.Errorf("untrusted image of the same tar compressed otherwise: %v", err)
	} else if got.Layers[0].DiffID != diffID {
		t.Errorf("diff id %s, want %s", got.Layers[0].DiffID, diffID)
	}
}
