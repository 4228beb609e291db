package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestTemplatesServe runs `sandlot serve` and the CLI: tenant A pulls a
// template "app" from a registry started here, tenant B imports its own
// "app" from a tarball; run_code with template "app" runs in each
// tenant's own image (real runtime), with its settings; B cannot start a
// sandbox on A's template id; a language the template lacks and a change
// of template on an existing context are 4xx.
func TestTemplatesServe(t *testing.T) {
	runtimePreconditions(t)
	dir := t.TempDir()
	d := startDaemon(t, dir, "--image-gc-interval", "0", "--pull-allow-cidr", "127.0.0.1/32") // the registry below
	defer d.stop(t)
	bin := testenv.SandlotBinary(t)
	otherKey := d.newTenant(t, "other")
	defer d.cleanup(t, d.key, otherKey)

	reg := templatestest.Registry(t)
	templatestest.Push(t, reg+"/a/app:1", templatestest.Image(t, "A"))
	archive := templatestest.DockerArchive(t, templatestest.Image(t, "B"), "b/app:1")
	cli := func(key string, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(append([]string{"template"}, args...), "--url", d.URL, "--api-key", key)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sandlot template %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	aID := strings.Fields(cli(d.key, "pull", "app", reg+"/a/app:1", "--kernels", "sh", "--env", "GREETING=from-a", "--workdir", "/srv"))[0]
	cli(otherKey, "import", "app", archive, "--kernels", "sh,bash")
	if ls := cli(d.key, "ls"); !strings.Contains(ls, aID) || !strings.Contains(ls, "default") {
		t.Errorf("A's ls:\n%s", ls)
	}
	if ls := cli(otherKey, "ls"); strings.Contains(ls, aID) {
		t.Errorf("B lists A's template:\n%s", ls)
	}

	ctx := context.Background()
	a, b := d.client(d.key), d.client(otherKey)
	run := func(c *client.Client, conv, tpl, lang, code string) (*api.RunCodeResult, error) {
		return c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: conv}, Language: lang, Code: code, Template: tpl})
	}
	const probe = `cat /marker; echo " $GREETING $(pwd)"`
	if r, err := run(a, "c", "app", "sh", probe); err != nil || r.Stdout != "A from-a /srv\n" {
		t.Errorf("A's app: %+v %v", r, err)
	}
	if r, err := run(b, "c", "app", "sh", probe); err != nil || r.Stdout != "B  /home/user\n" {
		t.Errorf("B's app: %+v %v", r, err)
	}
	var e *api.Error
	if _, err := run(b, "c2", aID, "sh", "cat /marker"); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Errorf("B on A's template id: %v, want not_found", err)
	}
	if _, err := run(a, "c", "", "python", "1+1"); !errors.As(err, &e) || e.Code != errdefs.CodeInvalidArgument || !strings.Contains(e.Message, "app") {
		t.Errorf("python on A's app: %v, want invalid_argument naming the template", err)
	}
	if _, err := run(a, "c", "default", "sh", "true"); !errors.As(err, &e) || e.Code != errdefs.CodeFailedPrecondition {
		t.Errorf("another template for an existing context: %v, want failed_precondition", err)
	}
	// The E2B surface creates by alias or id through the same resolution.
	code, body := raw(t, "POST", d.URL+"/sandboxes", d.key, `{"templateID":"app","timeout":60}`, "Content-Type", "application/json", "X-API-Key", d.key)
	var sb struct{ SandboxID, TemplateID string }
	json.Unmarshal([]byte(body), &sb)
	if code != 201 || sb.TemplateID != "app" {
		t.Errorf("E2B create by alias: %d %s", code, body)
	} else if rec, err := a.GetContext(ctx, sb.SandboxID); err != nil || rec.Template != aID {
		t.Errorf("E2B sandbox's context: %+v %v, want template %s", rec, err, aID)
	}
	if code, body := raw(t, "POST", d.URL+"/sandboxes", otherKey, `{"templateID":"`+aID+`"}`, "Content-Type", "application/json", "X-API-Key", otherKey); code != 404 {
		t.Errorf("E2B create on another tenant's template id: %d %s", code, body)
	}
	cli(d.key, "rm", "app")
	if r, err := run(b, "c3", "app", "sh", "cat /marker"); err != nil || r.Stdout != "B" {
		t.Errorf("B's app after A removed its own: %+v %v", r, err)
	}
	if _, err := run(a, "c4", "app", "sh", "true"); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Errorf("A's removed app: %v, want not_found", err)
	}
}
