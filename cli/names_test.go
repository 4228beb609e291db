package cli

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api/server/servertest"
)

// TestTenantNames: a tenant name is unique, and stands for its id in
// rotate-key, delete and mcp --tenant.
func TestTenantNames(t *testing.T) {
	dir := t.TempDir()
	code, out, errw := cliRun("tenant", "create", "acme", "--data-dir", dir, "-o", "json")
	var created struct{ ID, Name string }
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || created.Name != "acme" {
		t.Fatalf("create: %d %q %q", code, out, errw)
	}
	if code, _, errw := cliRun("tenant", "create", "acme", "--data-dir", dir); code != 4 || !strings.Contains(errw, `tenant name "acme" is taken`) {
		t.Fatalf("a second acme: exit %d, %q", code, errw)
	}
	if code, out, errw := cliRun("tenant", "rotate-key", "acme", "--data-dir", dir, "-o", "json"); code != 0 || !strings.Contains(out, created.ID) {
		t.Fatalf("rotate-key by name: %d %q %q", code, out, errw)
	}
	if code, _, errw := cliRun("tenant", "delete", "nobody", "--data-dir", dir); code != 3 || !strings.Contains(errw, `"nobody"`) {
		t.Fatalf("delete an unknown name: %d %q", code, errw)
	}
	if code, _, errw := cliRun("tenant", "delete", "acme", "--data-dir", dir); code != 0 {
		t.Fatalf("delete by name: %d %q", code, errw)
	}
	if code, out, _ := cliRun("tenant", "list", "--data-dir", dir, "-o", "json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after delete: %d %q", code, out)
	}
}

// TestContextByConversation: ctx get and rm take a conversation (and a
// path) wherever they take a context id.
func TestContextByConversation(t *testing.T) {
	e := servertest.NewEnv(nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	t.Setenv(envClientConfig, t.TempDir()+"/none.yaml")
	t.Setenv(envURL, ts.URL)
	t.Setenv(envAPIKey, e.KeyA)
	for _, conv := range []string{"demo", "other"} {
		if code, _, errw := cliRun("exec", "--conversation", conv, "x = 1"); code != 0 {
			t.Fatalf("exec %s: %d %s", conv, code, errw)
		}
	}
	code, out, errw := cliRun("ctx", "get", "demo", "-o", "json")
	var rec struct{ ID, ConversationID string }
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.ConversationID != "demo" {
		t.Fatalf("ctx get demo: %d %q %q", code, out, errw)
	}
	if code, out, _ := cliRun("ctx", "get", rec.ID, "-o", "json"); code != 0 || !strings.Contains(out, `"conversationId": "demo"`) {
		t.Fatalf("ctx get by id: %d %q", code, out)
	}
	if code, _, errw := cliRun("ctx", "get", "--conversation", "demo", "--path", "branch-b"); code != 3 || !strings.Contains(errw, `conversation "demo" has no active context on path branch-b`) {
		t.Fatalf("ctx get of a path without a context: %d %q", code, errw)
	}
	if code, out, errw := cliRun("ctx", "rm", "demo", "-o", "json"); code != 0 || !strings.Contains(out, rec.ID) {
		t.Fatalf("ctx rm demo: %d %q %q", code, out, errw)
	}
	if code, _, _ := cliRun("ctx", "get", "demo"); code != 3 {
		t.Fatalf("ctx get demo after rm: exit %d", code)
	}
	if code, _, errw := cliRun("ctx", "get", "-o", "json"); code != 2 || !strings.Contains(errw, `"code":"invalid_argument"`) {
		t.Fatalf("ctx get without a context, JSON mode: %d %q", code, errw)
	}
}
