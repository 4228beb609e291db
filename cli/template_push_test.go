package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggremote "github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestTemplatePush: the operator pushes a public template's pod image to
// a registry started here that asks for basic auth, with the credentials
// of a docker config ($DOCKER_CONFIG); the image pulled back runs the
// agent as its entrypoint, a second push names the same digest, and
// missing credentials, bad references and unknown templates fail clearly.
func TestTemplatePush(t *testing.T) {
	testenv.RequireRoot(t) // the image store keeps layers' owners
	ctx := context.Background()
	dir := t.TempDir()
	agent := testenv.PodAgentBinary(t)
	run := func(args ...string) (string, error) {
		var out, errw bytes.Buffer
		err := Run(ctx, append(append([]string{"template"}, args...), "--data-dir", dir), strings.NewReader(""), &out, &errw)
		return out.String() + errw.String(), err
	}
	src := templatestest.Registry(t)
	templatestest.Push(t, src+"/ops/base:1", templatestest.Image(t, "ops"))
	if out, err := run("pull", "shared", src+"/ops/base:1", "--public"); err != nil {
		t.Fatalf("pull --public: %v: %s", err, out)
	}

	dst := templatestest.AuthRegistry(t) // $DOCKER_CONFIG holds user:pass for it
	ref := dst + "/sandlot/shared:1"
	out, err := run("push", "shared", ref, "--agent", agent, "-o", "json")
	if err != nil {
		t.Fatalf("push: %v: %s", err, out)
	}
	var got pushed
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("push -o json: %v: %s", err, out)
	}
	if got.Template != "shared" || got.Ref != ref || got.Pinned != dst+"/sandlot/shared@"+got.Digest {
		t.Errorf("push printed %+v", got)
	}
	pinned, err := name.NewDigest(got.Pinned)
	if err != nil {
		t.Fatal(err)
	}
	img, err := ggremote.Image(pinned, ggremote.WithAuth(&authn.Basic{Username: "user", Password: "pass"}))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if ep := strings.Join(cf.Config.Entrypoint, " "); ep != podimage.AgentPath+" pod" || cf.Config.User != podimage.DefaultUser {
		t.Errorf("pushed image: entrypoint %q, user %q", ep, cf.Config.User)
	}
	if again, err := run("push", "shared", ref, "--agent", agent); err != nil || strings.TrimSpace(again) != got.Pinned {
		t.Errorf("second push: %v: %q, want the same %s", err, again, got.Pinned)
	}

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want error
			says string
		}{
			{"no registry", []string{"shared", "sandlot/shared:1"}, errdefs.ErrInvalidArgument, "REGISTRY/REPOSITORY:TAG"},
			{"no tag", []string{"shared", dst + "/sandlot/shared"}, errdefs.ErrInvalidArgument, "REGISTRY/REPOSITORY:TAG"},
			{"capitals", []string{"shared", dst + "/Sandlot/shared:1"}, errdefs.ErrInvalidArgument, "REGISTRY/REPOSITORY:TAG"},
			{"unknown template", []string{"nosuch", ref}, errdefs.ErrNotFound, "nosuch"},
			{"agent missing", []string{"shared", ref, "--tenant", "t1", "--agent", "/nonexistent/agent"}, errdefs.ErrInvalidArgument, "agent binary"},
			{"through a daemon", []string{"shared", ref, "--url", "http://127.0.0.1:1"}, errdefs.ErrInvalidArgument, "no daemon API"},
			{"agent not static", []string{"shared", ref, "--agent", "/bin/true"}, errdefs.ErrInvalidArgument, "dynamically linked"},
			{"the local agent", []string{"shared", ref, "--agent", testenv.AgentBinary(t)}, errdefs.ErrInvalidArgument, "sandlot-pod-agent"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, err := run(append([]string{"push"}, tc.args...)...)
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("push %v: %v (%s), want %v saying %q", tc.args, err, out, tc.want, tc.says)
				}
			})
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		_, err := run("push", "shared", dst+"/sandlot/other:1", "--agent", agent)
		if !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("push without credentials: %v, want unauthenticated", err)
		}
	})
}
