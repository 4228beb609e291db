package stack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// TestPortWakesSuspended: a context of a crun sandbox on an image, with a
// network, suspended to disk (sandbox and network gone): a request to its
// private port without the token, or with a wrong one, is refused and
// leaves it suspended; one with the token wakes it (a new sandbox, a new
// network) and reaches the new sandbox, whose server the request then
// finds once started.
func TestPortWakesSuspended(t *testing.T) {
	e := newEnv(t, 0)
	imgs, _ := debiantest.Default(t)
	st := memory.New()
	if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: "closed"}, tenant.HashKey("k")); err != nil {
		t.Fatal(err)
	}
	cat := templates.New(templates.Config{Store: st, Images: imgs})
	p := localtest.New(t, local.Config{Runtime: "crun", Networks: e.st, Images: imgs, Templates: cat})
	m := contexts.NewManager(st, p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Networks: e.st, Catalog: cat,
		Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	asleep := func(ctx context.Context, id string) (string, policy.Policy, bool) {
		rec, err := st.Get(tenant.WithID(ctx, ""), id)
		if err != nil || !rec.Suspended() || rec.Network == nil {
			return "", policy.Policy{}, false
		}
		return rec.TenantID, *rec.Network, true
	}
	h, err := e.st.Ports("sandlot.localhost", func(ctx context.Context, id, tn, token string) error {
		if token != "good-token" || tn != "closed" {
			return errdefs.ErrPermissionDenied
		}
		return nil
	}, func(ctx context.Context, id, tn string) (bool, error) {
		rec, err := m.Get(ctx, tn, id)
		if err != nil {
			return false, err
		}
		if !rec.Suspended() {
			return false, nil
		}
		_, err = m.Wake(ctx, tn, id)
		return err == nil, err
	}, asleep, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	id := contexts.Identity{TenantID: "closed", ConversationID: "sleepy", PathID: "main"}
	rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{Network: &policy.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "bash", Code: "echo awake-page > /home/user/p.html"}, nil); err != nil {
		t.Fatal(err)
	}
	first := rec.SandboxID
	if _, err := m.Suspend(ctx, "closed", rec.ID, 0); err != nil {
		t.Fatal(err)
	}
	get := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+l.Addr().String()+"/p.html", nil)
		req.Host = "8080-" + rec.ID + ".sandlot.localhost"
		if token != "" {
			req.Header.Set("E2B-Traffic-Access-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, token := range []string{"", "wrong"} {
		if code, body := get(token); code != 403 {
			t.Fatalf("token %q: %d %s, want 403", token, code, body)
		}
		if got, _ := m.Get(ctx, "closed", rec.ID); !got.Suspended() {
			t.Fatalf("a request with token %q woke the context", token)
		}
	}
	// The token: the context wakes; its new sandbox has no server yet,
	// so the route reaches it and finds the port closed (502, not
	// "paused" nor "not found").
	code, body := get("good-token")
	got, err := m.Get(ctx, "closed", rec.ID)
	if err != nil || got.Suspended() || got.SandboxID == "" || got.SandboxID == first {
		t.Fatalf("after an authorized request (%d %s): %+v, %v; want woken on a new sandbox", code, body, got, err)
	}
	if code != 502 || strings.Contains(body, "paused") || strings.Contains(body, "not found") {
		t.Fatalf("the authorized request: %d %s; want the new sandbox's closed port", code, body)
	}
	if _, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "bash", Code: "cd /home/user && (nohup python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1 &) ; for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done"}, nil); err != nil {
		t.Fatal(err)
	}
	if code, body := get("good-token"); code != 200 || !strings.Contains(body, "awake-page") {
		t.Fatalf("the woken sandbox's port: %d %s, want its file (kept through the suspend)", code, body)
	}
	if _, err := m.Wake(ctx, "other", rec.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's wake: %v", err)
	}
}
