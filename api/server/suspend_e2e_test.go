package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
)

// TestSuspendServe: through `sandlot serve` on the real runtime, POST
// /v1/contexts/{id}/suspend frees a context's sandbox; another tenant
// can neither read nor suspend it (404); a daemon restart keeps it
// suspended; the next run_code wakes it on a new sandbox with its file and
// without its python variable, and the result says so (woken, a notice).
func TestSuspendServe(t *testing.T) {
	runtimePreconditions(t)
	dir := t.TempDir()
	d := startDaemon(t, dir, "--image-gc-interval", "0")
	otherKey := d.newTenant(t, "other")
	ctx := context.Background()
	a, b := d.client(d.key), d.client(otherKey)
	py := func(c *client.Client, code string) *api.RunCodeResult {
		t.Helper()
		r, err := c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: "sus"}, Language: "python", Code: code})
		if err != nil {
			t.Fatalf("run_code %q: %v", code, err)
		}
		return r
	}
	src := py(a, "x = 41\nopen('/home/user/kept.txt', 'w').write('kept')")
	if !src.Success {
		t.Fatalf("setup: %+v", src)
	}
	var e *api.Error
	if _, err := b.Suspend(ctx, src.ContextID); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Fatalf("another tenant's suspend: %v, want not_found", err)
	}
	c, err := a.Suspend(ctx, src.ContextID)
	if err != nil || !c.Suspended || c.Memory || c.SandboxID != "" || c.Status != "ready" {
		t.Fatalf("suspend: %+v %v, want suspended without its memory", c, err)
	}
	if _, err := a.Suspend(ctx, src.ContextID); !errors.As(err, &e) || e.Code != errdefs.CodeFailedPrecondition {
		t.Fatalf("a second suspend: %v, want failed_precondition", err)
	}
	d.stop(t)

	d = startDaemon(t, dir, "--image-gc-interval", "0")
	defer d.stop(t)
	defer d.cleanup(t, d.key, otherKey)
	a, b = d.client(d.key), d.client(otherKey)
	if _, err := b.GetContext(ctx, src.ContextID); !errors.As(err, &e) || e.Code != errdefs.CodeNotFound {
		t.Fatalf("another tenant reads it: %v, want not_found", err)
	}
	if c, err := a.GetContext(ctx, src.ContextID); err != nil || !c.Suspended {
		t.Fatalf("after a restart: %+v %v", c, err)
	}
	r := py(a, "x")
	if r.ContextID != src.ContextID || r.SandboxID == src.SandboxID || !r.Woken || !strings.Contains(r.Notice, "suspended") {
		t.Fatalf("first call after the suspend: %+v, want the same context woken on a new sandbox", r)
	}
	if r.Error == nil || r.Error.Name != "NameError" {
		t.Fatalf("x after wake: %+v, want NameError (kernels start fresh)", r)
	}
	r = py(a, "open('/home/user/kept.txt').read()")
	if r.Woken || len(r.Results) == 0 || r.Results[0].Text != "'kept'" {
		t.Fatalf("the file after wake: %+v", r)
	}
}
