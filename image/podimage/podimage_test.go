package podimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/testenv"
)

// agent is the real static sandlot-pod-agent, which pod images carry.
func agent(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testenv.PodAgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// template is a small template image: a base layer, a command (which the
// pod image must drop) and the given user and architecture.
func template(t *testing.T, user, arch string, oci bool) v1.Image {
	t.Helper()
	var base v1.Image = empty.Image
	if oci {
		base = mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	}
	img, err := mutate.AppendLayers(base, imagetest.Layer(t,
		imagetest.File{Name: "bin/", Type: tar.TypeDir},
		imagetest.File{Name: "bin/sh", Body: "#!/bin/sh\n", Mode: 0o755},
		imagetest.File{Name: "usr/local/bin/", Type: tar.TypeDir},
		imagetest.File{Name: "usr/local/bin/tool", Body: "tool", Mode: 0o755}))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: time.Unix(1710000000, 0).UTC()}
	cf.Config = v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, Cmd: []string{"/bin/bash"},
		WorkingDir: "/home/user", User: user, Labels: map[string]string{"org.example": "kept"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestBuild(t *testing.T) {
	bin := agent(t)
	for _, tc := range []struct {
		name, user, wantUser string
		oci                  bool
		wantLayerType        types.MediaType
	}{
		{name: "no user, docker", wantUser: "1000", wantLayerType: types.DockerLayer},
		{name: "own user kept, oci", user: "app", wantUser: "app", oci: true, wantLayerType: types.OCILayer},
		{name: "root kept", user: "0", wantUser: "0", wantLayerType: types.DockerLayer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := template(t, tc.user, "amd64", tc.oci)
			img, err := podimage.Build(context.Background(), tmpl, bin)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			want := v1.Config{
				Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, WorkingDir: "/home/user",
				Entrypoint: []string{"/usr/local/bin/sandlot-agent", "pod"}, User: tc.wantUser,
				Labels: map[string]string{"org.example": "kept", podimage.LabelAgent: sha256Hex(bin)},
			}
			if diff := cmp.Diff(want, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if cf.Created.Unix() != 1710000000 {
				t.Errorf("created %s, want the template's", cf.Created)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 2 {
				t.Fatalf("%d layers, want the template's and the agent's", len(layers))
			}
			if mt, _ := layers[1].MediaType(); mt != tc.wantLayerType {
				t.Errorf("agent layer media type %s, want %s", mt, tc.wantLayerType)
			}
			type entry struct {
				Name     string
				Type     byte
				Mode     int64
				UID, GID int
				ModTime  int64
			}
			var got []entry
			var body []byte
			rc, err := layers[1].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.Unix()})
				if h.Typeflag == tar.TypeReg {
					body, _ = io.ReadAll(tr)
				}
			}
			epoch := podimage.Epoch.Unix()
			wantEntries := []entry{
				{"usr/", tar.TypeDir, 0o755, 0, 0, epoch},
				{"usr/local/", tar.TypeDir, 0o755, 0, 0, epoch},
				{"usr/local/bin/", tar.TypeDir, 0o755, 0, 0, epoch},
				{"usr/local/bin/sandlot-agent", tar.TypeReg, 0o755, 0, 0, epoch},
			}
			if diff := cmp.Diff(wantEntries, got); diff != "" {
				t.Errorf("agent layer (-want +got):\n%s", diff)
			}
			if !bytes.Equal(body, bin) {
				t.Errorf("the layer's agent (%d bytes) is not the binary given (%d bytes)", len(body), len(bin))
			}
			// The flattened root keeps the template's files beside the agent.
			names := map[string]bool{}
			ftr := tar.NewReader(mutate.Extract(img))
			for {
				h, err := ftr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				names[h.Name] = true
			}
			for _, n := range []string{"bin/sh", "usr/local/bin/tool", "usr/local/bin/sandlot-agent"} {
				if !names[n] {
					t.Errorf("the pod image's root lacks %s", n)
				}
			}
		})
	}
}

// TestBuildReproducible builds the pod image of equal templates twice,
// each from inputs made anew, and wants one digest; another agent gives
// another image.
func TestBuildReproducible(t *testing.T) {
	bin := agent(t)
	digest := func(agent []byte) (v1.Hash, v1.Hash) {
		img, err := podimage.Build(context.Background(), template(t, "", "amd64", true), agent)
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
		return imagetest.Digest(t, img), ld
	}
	d1, l1 := digest(bin)
	d2, l2 := digest(bytes.Clone(bin))
	if d1 != d2 || l1 != l2 {
		t.Errorf("two builds differ: image %s and %s, agent layer %s and %s", d1, d2, l1, l2)
	}
	other := append(bytes.Clone(bin), 0) // still a static ELF, other bytes
	if d3, _ := digest(other); d3 == d1 {
		t.Errorf("another agent gave the same image %s", d3)
	}
}

// TestBuildRefusesAgents: what cannot run as the pod's entrypoint is
// invalid_argument before any image is made.
func TestBuildRefusesAgents(t *testing.T) {
	bin := agent(t)
	local, err := os.ReadFile(testenv.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	dynamic, err := os.ReadFile("/bin/true") // Debian's coreutils: dynamically linked
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, arch string
		agent      []byte
	}{
		{"not elf", "amd64", []byte("#!/bin/sh\necho agent\n")},
		{"empty", "amd64", nil},
		{"dynamic", "amd64", dynamic},
		{"other architecture", "arm64", bin},
		{"the local agent (no pod mode)", "amd64", local},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := podimage.Build(context.Background(), template(t, "", tc.arch, false), tc.agent)
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("got %v, want invalid_argument", err)
			}
		})
	}
}

// TestWallAgentNotReplaceable: a template whose /usr/local/bin the
// sandbox user owns (or that ships a sandlot-agent of its own) still gets
// the real agent, in a root-owned 0755 directory, so code running as the
// image's user cannot swap the binary on disk for whatever runs it by its
// path later (an operator's kubectl exec, a container started on a
// writable copy of the tree).
func TestWallAgentNotReplaceable(t *testing.T) {
	bin := agent(t)
	tmpl := imagetest.Image(t, imagetest.Layer(t,
		imagetest.File{Name: "usr/", Type: tar.TypeDir},
		imagetest.File{Name: "usr/local/", Type: tar.TypeDir, Mode: 0o777, UID: 1000, GID: 1000},
		imagetest.File{Name: "usr/local/bin/", Type: tar.TypeDir, Mode: 0o777, UID: 1000, GID: 1000},
		imagetest.File{Name: "usr/local/bin/sandlot-agent", Body: "#!/bin/sh\necho impostor\n", Mode: 0o777, UID: 1000, GID: 1000}))
	img, err := podimage.Build(context.Background(), tmpl, bin)
	if err != nil {
		t.Fatal(err)
	}
	type meta struct {
		Mode     int64
		UID, GID int
	}
	got := map[string]meta{}
	var body []byte
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = meta{h.Mode & 0o7777, h.Uid, h.Gid}
		if h.Name == "usr/local/bin/sandlot-agent" {
			body, _ = io.ReadAll(tr)
		}
	}
	want := map[string]meta{
		"usr":                         {0o755, 0, 0},
		"usr/local":                   {0o755, 0, 0},
		"usr/local/bin":               {0o755, 0, 0},
		"usr/local/bin/sandlot-agent": {0o755, 0, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the pod image's root (-want +got):\n%s", diff)
	}
	if !bytes.Equal(body, bin) {
		t.Errorf("the pod image runs the template's sandlot-agent (%d bytes), not the one given", len(body))
	}
}
