package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// TestSuspendSandboxTool: suspend_sandbox suspends the caller's context
// to disk (crun, the default image): its sandbox is gone, a second call
// says it already is, the next file call wakes it with its file; a path
// without a sandbox is not_found, and another conversation's context is
// never touched (the tool acts on the caller's identity only).
func TestSuspendSandboxTool(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "crun")
	imgs, _ := debiantest.Default(t)
	st := memory.New()
	if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: "t1"}, tenant.HashKey("kt1")); err != nil {
		t.Fatal(err)
	}
	cat := templates.New(templates.Config{Store: st, Images: imgs})
	dir, err := os.MkdirTemp("", "slt-")
	if err != nil {
		t.Fatal(err)
	}
	p, err := local.New(local.Config{Runtime: "crun", StateDir: dir, AgentPath: testenv.AgentBinary(t), Images: imgs, Templates: cat,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := p.List(context.Background())
		for _, id := range ids {
			p.Destroy(context.Background(), id)
		}
		oci.Purge(dir)
	})
	ctx := context.Background()
	m := contexts.NewManager(st, p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: cat})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	r := tools.New(m, tools.Config{})
	mine := contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}
	other := contexts.Identity{TenantID: "t1", ConversationID: "other", PathID: "main"}
	call := func(id contexts.Identity, tool, args string) (any, error) {
		return r.Call(ctx, tools.Call{Name: tool, Identity: id, Args: json.RawMessage(args)}, nil)
	}
	for _, id := range []contexts.Identity{mine, other} {
		if _, err := call(id, "write_file", `{"path":"kept.txt","content":"through the suspend"}`); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := m.Lookup(ctx, mine)
	otherRec, _ := m.Lookup(ctx, other)

	v, err := call(mine, "suspend_sandbox", `{}`)
	res, ok := v.(*tools.SuspendSandboxResult)
	if err != nil || !ok || !res.Success || res.ContextID != before.ID || !strings.Contains(res.Notice, "files are kept") || res.Memory || res.ConversationID != "c" {
		t.Fatalf("suspend_sandbox: %+v, %v", v, err)
	}
	if ids, _ := p.List(ctx); contains(ids, before.SandboxID) {
		t.Fatal("the suspended context's sandbox still runs")
	}
	if got, _ := m.Lookup(ctx, other); got.Suspended() || got.SandboxID != otherRec.SandboxID {
		t.Fatalf("another conversation's context after the suspend: %+v", got)
	}
	v, err = call(mine, "suspend_sandbox", `{}`)
	if res, ok := v.(*tools.SuspendSandboxResult); err != nil || !ok || !res.Success || !strings.Contains(res.Notice, "already") {
		t.Fatalf("second suspend_sandbox: %+v, %v", v, err)
	}
	if _, err := call(mine, "suspend_sandbox", `{"contextId":"x"}`); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("suspend_sandbox with an argument: %v, want invalid_argument", err)
	}
	v, err = call(contexts.Identity{TenantID: "t1", ConversationID: "none", PathID: "main"}, "suspend_sandbox", `{}`)
	if res, ok := v.(*tools.FailureResult); err != nil && !errors.Is(err, errdefs.ErrNotFound) || ok && !strings.Contains(res.Error.Value, "no sandbox") || err == nil && !ok {
		t.Fatalf("suspend_sandbox on a path without a sandbox: %+v, %v; want not_found", v, err)
	}
	v, err = call(mine, "read_file", `{"path":"kept.txt"}`)
	if err != nil || !strings.Contains(jsonOf(t, v), "through the suspend") {
		t.Fatalf("read_file after the suspend: %s, %v", jsonOf(t, v), err)
	}
	if after, _ := m.Lookup(ctx, mine); after.ID != before.ID || after.Suspended() || after.SandboxID == before.SandboxID {
		t.Fatalf("after the wake: %+v, want the same context on a new sandbox", after)
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
