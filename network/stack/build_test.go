package stack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/provider/local"
)

// TestBuildNetwork: a build step's sandbox reaches what the build's
// allowlist names and nothing else, through the stack's proxy; without a
// build network it reaches nothing.
func TestBuildNetwork(t *testing.T) {
	e := newEnv(t, 0)
	_, img := debiantest.Default(t)
	p := newProvider(t, "crun", e.st)
	allow, err := local.BuildNetwork([]string{"www.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	step := func(r build.Runner, cmd string) string {
		t.Helper()
		scratch := t.TempDir()
		upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
		for _, d := range []string{upper, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := r.Run(ctx, build.RunRequest{Lower: img.LowerDirs(), Upper: upper, Work: work,
			Args: []string{"/bin/sh", "-c", cmd}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Output: &out})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("step %q: %v %+v\n%s", cmd, err, res, out.String())
		}
		return out.String()
	}
	cmd := "curl -sS -m 20 http://www.example.test/hello; echo; curl -sS -m 20 http://other.test/x; echo; true"
	out := step(p.BuildRunner(local.BuildConfig{Network: allow, Tenant: "builder"}), cmd)
	if !strings.Contains(out, `"Path":"/hello"`) || strings.Contains(out, `"Path":"/x"`) {
		t.Errorf("allowlisted build step:\n%s", out)
	}
	out = step(p.BuildRunner(local.BuildConfig{}), cmd)
	if strings.Contains(out, `"Path"`) {
		t.Errorf("build step without a network reached the world:\n%s", out)
	}
}
