package server_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard/guardtest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestTemplateBuildServe builds through `sandlot serve` with the CLI's
// remote mode (POST /v1/templates/builds, the log streamed back): a
// Dockerfile that COPYs a file of the context and RUNs a command (in a
// sandbox of the real runtime) that prints a secret; the log shows the
// secret redacted; run_code in a context of the template reads both
// files. Another tenant sees neither the build nor the template; a failing
// RUN makes the CLI exit non-zero with the reason.
func TestTemplateBuildServe(t *testing.T) {
	runtimePreconditions(t)
	dir := t.TempDir()
	d := startDaemon(t, dir, "--image-gc-interval", "0")
	defer d.stop(t)
	bin := testenv.SandlotBinary(t)
	otherKey := d.newTenant(t, "other")
	defer d.cleanup(t, d.key, otherKey)

	token := guardtest.GitHubToken()
	ctxDir := t.TempDir()
	os.WriteFile(filepath.Join(ctxDir, "data.txt"), []byte("from the context\n"), 0o644)
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM default\nCOPY data.txt /opt/data.txt\n"+
		"RUN echo \"built by $(id -u)\" > /opt/run.txt && echo \"deploy token: "+token+"\"\n"), 0o644)
	os.WriteFile(filepath.Join(ctxDir, "Failing"), []byte("FROM default\nRUN echo why-it-failed; exit 3\n"), 0o644)
	build := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"template", "build", "--url", d.URL, "--api-key", d.key}, args...)...)
		cmd.Env = append(os.Environ(), "SANDLOT_URL=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	log, err := build("-t", "app", ctxDir)
	if err != nil {
		t.Fatalf("template build: %v\n%s", err, log)
	}
	if strings.Contains(log, token) || !strings.Contains(log, "deploy token: [REDACTED:GITHUB_TOKEN]") || !strings.Contains(log, "built app ") {
		t.Errorf("build log not guarded or incomplete:\n%s", log)
	}
	m := regexp.MustCompile(`build ([0-9a-f]{32}) of app queued`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no build id in:\n%s", log)
	}

	ctx := context.Background()
	a, b := d.client(d.key), d.client(otherKey)
	st, err := a.TemplateBuild(ctx, m[1], 0)
	if err != nil || st.Status != api.BuildReady || st.Template == nil || st.Template.Name != "app" {
		t.Fatalf("build status %+v: %v", st, err)
	}
	for _, l := range st.Logs {
		if strings.Contains(l.Message, token) {
			t.Errorf("status log leaks the secret: %q", l.Message)
		}
	}
	r, err := a.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: "built"}, Template: "app", Language: "python",
		Code: "print(open('/opt/data.txt').read() + open('/opt/run.txt').read(), end='')"})
	if err != nil || r.Stdout != "from the context\nbuilt by 0\n" {
		t.Fatalf("run_code in the built template: %+v %v", r, err)
	}
	if _, err := b.TemplateBuild(ctx, m[1], 0); !client.IsNotFound(err) {
		t.Errorf("another tenant's status call: %v, want not_found", err)
	}
	var e *api.Error
	if _, err := b.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: "steal"}, Template: st.Template.ID, Language: "python", Code: "1"}); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Errorf("another tenant on the template's id: %v, want not_found", err)
	}

	log, err = build("-t", "broken", "-f", filepath.Join(ctxDir, "Failing"), ctxDir)
	if err == nil || !strings.Contains(log, "why-it-failed") || !strings.Contains(log, "exit code 3") {
		t.Errorf("failing build: %v\n%s", err, log)
	}
}
