package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestRun is make images on the tests' shared store (its Debian bases
// built once per machine): both layouts are written and pushed, under the
// names the kubernetes provider and the chart look for, and the layouts
// hold what was pushed.
func TestRun(t *testing.T) {
	debiantest.Default(t)
	debiantest.Image(t, daemonimage.BaseConfig(), "sandlot-daemon-base")
	agent, podAgent := testenv.AgentBinary(t), testenv.PodAgentBinary(t)
	reg := templatestest.Registry(t)
	out := t.TempDir()
	// The static agent stands in for the static sandlot: what is checked
	// here is where images go, not what the binaries do.
	c := config{store: debiantest.StoreDir(), out: out, sandlot: agent, agent: agent, podAgent: podAgent, version: "v9.8.7+dirty", registry: reg + "/", podDefault: true}
	if err := run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ layout, ref string }{
		{"sandlot-daemon", "sandlot/daemon:v9.8.7-dirty"},
		{"sandlot-pod-default", "sandlot/templates/default:v9.8.7-dirty"},
		{"sandlot-pod-default", "sandlot/templates/default:latest"},
	} {
		p, err := layout.FromPath(out + "/" + tc.layout)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil || len(m.Manifests) != 1 {
			t.Fatalf("%s: %v, %v", tc.layout, m, err)
		}
		ref, err := name.ParseReference(reg + "/" + tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref)
		if err != nil {
			t.Fatalf("%s was not pushed: %v", tc.ref, err)
		}
		if desc.Digest != m.Manifests[0].Digest {
			t.Errorf("%s is %s, the layout %s holds %s", tc.ref, desc.Digest, tc.layout, m.Manifests[0].Digest)
		}
		if tc.layout == "sandlot-pod-default" {
			// The pod image carries the pod agent, not the local one.
			img, err := p.Image(m.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(podAgent)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if got := cf.Config.Labels[podimage.LabelAgent]; got != hex.EncodeToString(sum[:]) {
				t.Errorf("the pod image's agent is %s, the pod agent's SHA-256 is %x", got, sum)
			}
		}
	}
}
