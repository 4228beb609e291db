package podimage_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/templates/templatestest"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// DockerConfig writes a docker config dir holding user:pass for host and
// points $DOCKER_CONFIG at it, as `docker login` would leave it.
func DockerConfig(t *testing.T, host, user, pass string) {
	t.Helper()
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	body := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
}

func TestPush(t *testing.T) {
	img, err := podimage.Build(context.Background(), template(t, "", "amd64", true), agent(t))
	if err != nil {
		t.Fatal(err)
	}
	want := imagetest.Digest(t, img)
	t.Run("anonymous", func(t *testing.T) {
		host := templatestest.Registry(t)
		pinned, err := podimage.Push(context.Background(), img, host+"/sandlot/default:1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if pinned.String() != host+"/sandlot/default@"+want.String() {
			t.Errorf("pinned %s, want the repository at %s", pinned, want)
		}
		got, err := remote.Image(pinned)
		if err != nil {
			t.Fatal(err)
		}
		if d := imagetest.Digest(t, got); d != want {
			t.Errorf("pulled %s, pushed %s", d, want)
		}
		cf, err := got.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if ep := strings.Join(cf.Config.Entrypoint, " "); ep != podimage.AgentPath+" pod" {
			t.Errorf("pulled entrypoint %q", ep)
		}
	})
	t.Run("basic auth from the docker config", func(t *testing.T) {
		host := templatestest.AuthRegistry(t) // user:pass
		ref := host + "/team/pod:v1"
		// Without credentials the registry refuses: unauthenticated,
		// naming where credentials come from.
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		_, err := podimage.Push(context.Background(), img, ref, authn.DefaultKeychain)
		if !errors.Is(err, errdefs.ErrUnauthenticated) || !strings.Contains(err.Error(), "docker config") {
			t.Fatalf("push without credentials: %v, want unauthenticated naming the docker config", err)
		}
		DockerConfig(t, host, "user", "wrong")
		if _, err := podimage.Push(context.Background(), img, ref, authn.DefaultKeychain); !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Fatalf("push with a wrong password: %v, want unauthenticated", err)
		}
		DockerConfig(t, host, "user", "pass")
		pinned, err := podimage.Push(context.Background(), img, ref, authn.DefaultKeychain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Image(pinned, remote.WithAuth(&authn.Basic{Username: "user", Password: "pass"}))
		if err != nil {
			t.Fatal(err)
		}
		if d := imagetest.Digest(t, got); d != want {
			t.Errorf("pulled %s, pushed %s", d, want)
		}
		// The tag names the image too.
		tag, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(tag, remote.WithAuth(&authn.Basic{Username: "user", Password: "pass"}))
		if err != nil {
			t.Fatal(err)
		}
		if desc.Digest != want {
			t.Errorf("tag %s names %s, want %s", ref, desc.Digest, want)
		}
	})
	t.Run("digest reference", func(t *testing.T) {
		host := templatestest.Registry(t)
		if _, err := podimage.Push(context.Background(), img, host+"/p@"+want.String(), nil); err != nil {
			t.Errorf("push to its own digest: %v", err)
		}
		other := "sha256:" + strings.Repeat("ab", 32)
		if _, err := podimage.Push(context.Background(), img, host+"/p@"+other, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("push to another digest: %v, want invalid_argument", err)
		}
	})
	t.Run("registry down", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		host := strings.TrimPrefix(srv.URL, "http://")
		srv.Close()
		if _, err := podimage.Push(context.Background(), img, host+"/p:1", nil); !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("push to a closed port: %v, want unavailable", err)
		}
	})
}

// TestParseRefRefuses: a reference that would need filling in, or is no
// reference, is refused before anything is dialed.
func TestParseRefRefuses(t *testing.T) {
	for _, ref := range []string{
		"",
		"sandlot/default:1",              // no registry: docker would send it to Docker Hub
		"default",                        // a template name, not a reference
		"registry.example/Sandlot/py:1",  // capitals in the repository
		"registry.example/py",            // no tag
		"registry.example/py:bad tag",    // a space
		"registry.example/py:1@sha256:1", // a short digest
		"registry.example/../py:1",       // a path component
		"https://registry.example/py:1",  // a URL
	} {
		t.Run(ref, func(t *testing.T) {
			_, err := podimage.ParseRef(ref)
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "REGISTRY/REPOSITORY:TAG") {
				t.Errorf("ParseRef(%q): %v, want invalid_argument saying the form", ref, err)
			}
		})
	}
	for _, ref := range []string{"127.0.0.1:5000/sandlot/default:1", "registry.example/team/py@sha256:" + strings.Repeat("ab", 32), "localhost:5000/p:latest"} {
		if _, err := podimage.ParseRef(ref); err != nil {
			t.Errorf("ParseRef(%q): %v", ref, err)
		}
	}
}
