package daemonimage_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

func base(t *testing.T) v1.Image {
	return imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "etc/os-release", Body: "ID=debian\n"}))
}

// static is the real static sandlot-agent. The layer's reproducibility is
// about how binaries are packed, so it stands for both binaries here
// (`make images` packs a CGO_ENABLED=0 sandlot the same way).
func static(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testenv.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuildReproducible: two builds from inputs made anew give the same
// binaries' layer, the same image and the same OCI layout bytes.
func TestBuildReproducible(t *testing.T) {
	bin := static(t)
	other := append(bytes.Clone(bin), 0) // another static binary
	type result struct {
		image, layer v1.Hash
		index        []byte
	}
	build := func() result {
		img, err := daemonimage.Build(context.Background(), base(t), other, bytes.Clone(bin), "v1.2.3")
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		ld, err := layers[len(layers)-1].Digest()
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "layout")
		if err := daemonimage.WriteLayout(dir, img, "sandlot:v1.2.3"); err != nil {
			t.Fatal(err)
		}
		index, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := layout.FromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		back, err := p.Image(imagetest.Digest(t, img))
		if err != nil {
			t.Fatalf("the layout does not hold the image: %v", err)
		}
		if d := imagetest.Digest(t, back); d != imagetest.Digest(t, img) {
			t.Errorf("layout image %s, built %s", d, imagetest.Digest(t, img))
		}
		return result{imagetest.Digest(t, img), ld, index}
	}
	a, b := build(), build()
	if a.layer != b.layer || a.image != b.image || !bytes.Equal(a.index, b.index) {
		t.Errorf("two builds differ: layers %s %s, images %s %s, index\n%s\n%s", a.layer, b.layer, a.image, b.image, a.index, b.index)
	}
}

func TestBuildConfig(t *testing.T) {
	bin := static(t)
	img, err := daemonimage.Build(context.Background(), base(t), bin, bin, "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/local/bin/sandlot", "serve"}
	if diff := cmp.Diff(want, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cf.Config.User != "0" || cf.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("user %q, labels %v", cf.Config.User, cf.Config.Labels)
	}
	if _, ok := cf.Config.Volumes["/var/lib/sandlot"]; !ok {
		t.Errorf("volumes %v lack the data dir", cf.Config.Volumes)
	}
	dynamic, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := daemonimage.Build(context.Background(), base(t), dynamic, bin, "v1"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a dynamic sandlot: %v, want invalid_argument", err)
	}
}
