package client_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
)

func setup(t *testing.T) (*servertest.Env, *client.Client, *httptest.Server) {
	t.Helper()
	e := servertest.NewEnv(func(c *server.Config) { c.MaxUploadBytes = 4 << 20 })
	ts := httptest.NewServer(e.Handler)
	t.Cleanup(ts.Close)
	return e, client.New(ts.URL, client.WithAPIKey(e.KeyA)), ts
}

func TestRunCode(t *testing.T) {
	_, c, _ := setup(t)
	ctx := context.Background()
	res, err := c.RunCode(ctx, client.RunCodeRequest{Language: "python", Code: "x=7"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ConversationID == "" || res.PathID != "main" {
		t.Fatalf("%+v", res)
	}
	res, err = c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: res.ConversationID}, Language: "python", Code: "print(x)", Timeout: 5 * time.Second})
	if err != nil || res.Stdout != "7\n" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestRunCodeStream(t *testing.T) {
	_, c, _ := setup(t)
	var got []string
	res, err := c.RunCodeStream(context.Background(), client.RunCodeRequest{Target: client.Target{ConversationID: "s"}, Language: "python", Code: "a\nb"},
		func(ev api.Event) error { got = append(got, ev.Type+":"+ev.Data); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"stdout:a\n", "stdout:b\n"}, got); d != "" {
		t.Fatal(d)
	}
	if res.Stdout != "a\nb\n" || res.ConversationID != "s" {
		t.Fatalf("%+v", res)
	}
	// Errors before the stream starts and inside it both come back typed.
	_, err = c.RunCodeStream(context.Background(), client.RunCodeRequest{Language: "cobol", Code: "x"}, nil)
	if !client.IsInvalidArgument(err) {
		t.Fatalf("%v", err)
	}
	_, err = c.RunCodeStream(context.Background(), client.RunCodeRequest{Language: "python", Code: "a\nfail"}, nil)
	if client.Code(err) != errdefs.CodeInternal {
		t.Fatalf("%v", err)
	}
}

func TestToolEvents(t *testing.T) {
	_, c, _ := setup(t)
	var types []string
	for ev, err := range c.ToolEvents(context.Background(), "run_code", client.Target{ConversationID: "it"}, api.RunCodeArgs{Language: "python", Code: "a\nb"}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if d := cmp.Diff([]string{"stdout", "stdout", "final"}, types); d != "" {
		t.Fatal(d)
	}
	// Breaking early is fine.
	for range c.ToolEvents(context.Background(), "run_code", client.Target{ConversationID: "it"}, api.RunCodeArgs{Language: "python", Code: "a\nb"}) {
		break
	}
	var last error
	for _, err := range c.ToolEvents(context.Background(), "nope", client.Target{}, nil) {
		last = err
	}
	if !client.IsNotFound(last) {
		t.Fatalf("%v", last)
	}
}

func TestErrors(t *testing.T) {
	e, c, ts := setup(t)
	ctx := context.Background()
	if _, err := c.GetContext(ctx, "nope"); !client.IsNotFound(err) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := c.RunCode(ctx, client.RunCodeRequest{Language: "cobol"}); !client.IsInvalidArgument(err) {
		t.Errorf("bad language: %v", err)
	}
	if _, err := c.Upload(ctx, client.FileTarget{ConversationID: "c"}, "big", bytes.NewReader(make([]byte, 5<<20))); !client.IsResourceExhausted(err) {
		t.Errorf("big upload: %v", err)
	}
	bad := client.New(ts.URL, client.WithAPIKey("e2b_"+strings.Repeat("0", 40)))
	if _, err := bad.ListContexts(ctx, client.ListOptions{}); !client.IsUnauthenticated(err) {
		t.Errorf("bad key: %v", err)
	}
	if _, err := client.New("not a url").ListContexts(ctx, client.ListOptions{}); !client.IsInvalidArgument(err) {
		t.Errorf("bad base URL: %v", err)
	}
	if _, err := client.New("http://127.0.0.1:1").ListContexts(ctx, client.ListOptions{}); !client.IsUnavailable(err) {
		t.Errorf("no server: %v", err)
	}
	// A non-JSON error page still gets a category.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", 404) }))
	defer plain.Close()
	if _, err := client.New(plain.URL).GetContext(ctx, "x"); !client.IsNotFound(err) {
		t.Errorf("plain 404: %v", err)
	}
	// The guard-mode override is for admin tenants: tenant-a is not one.
	override := client.New(ts.URL, client.WithAPIKey(e.KeyA), client.WithHeader(api.HeaderGuardMode, "off"))
	if _, err := override.ListContexts(ctx, client.ListOptions{}); !client.IsPermissionDenied(err) || client.Code(err) != errdefs.CodePermissionDenied {
		t.Errorf("non-admin override: %v", err)
	}
}

func TestAudit(t *testing.T) {
	e, c, _ := setup(t)
	e.Audit = append(e.Audit,
		audit.Event{ID: 1, TenantID: "tenant-a", Kind: audit.KindGuardFinding, Detail: map[string]string{"type": "EMAIL"}},
		audit.Event{ID: 2, TenantID: "tenant-a", Kind: audit.KindKeyRotated},
		audit.Event{ID: 3, TenantID: "tenant-b", Kind: audit.KindGuardFinding})
	l, err := c.Audit(context.Background(), audit.KindGuardFinding, 10)
	if err != nil || len(l.Events) != 1 || l.Events[0].Detail["type"] != "EMAIL" {
		t.Fatalf("%+v %v", l, err)
	}
	if l, err := c.Audit(context.Background(), "", 0); err != nil || len(l.Events) != 2 || l.Events[0].ID != 2 {
		t.Fatalf("%+v %v", l, err)
	}
}

func TestContextsAndFiles(t *testing.T) {
	e, c, _ := setup(t)
	ctx := context.Background()
	if _, err := c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{ConversationID: "c", PathID: "p"}, Language: "python", Code: "x=1"}); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListContexts(ctx, client.ListOptions{ConversationID: "c", Status: []string{"active"}})
	if err != nil || len(l.Contexts) != 1 {
		t.Fatalf("%+v %v", l, err)
	}
	id := l.Contexts[0].ID
	rec, err := c.GetContext(ctx, id)
	if err != nil || rec.PathID != "p" {
		t.Fatalf("%+v %v", rec, err)
	}
	data := bytes.Repeat([]byte("z"), 3<<20)
	fi, err := c.Upload(ctx, client.FileTarget{ContextID: id}, "d/f.bin", bytes.NewReader(data))
	if err != nil || fi.Size != int64(len(data)) || fi.Path != "/home/user/d/f.bin" {
		t.Fatalf("%+v %v", fi, err)
	}
	var buf bytes.Buffer
	var size int64
	n, err := c.Download(ctx, client.FileTarget{ConversationID: "c", PathID: "p"}, "/home/user/d/f.bin", &buf, func(s int64) { size = s })
	if err != nil || n != int64(len(data)) || size != n || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("%d %d %v", n, size, err)
	}
	fl, err := c.ListFiles(ctx, client.FileTarget{ContextID: id}, "d", 0)
	if err != nil || len(fl.Entries) != 1 {
		t.Fatalf("%+v %v", fl, err)
	}
	if err := c.PathEvent(ctx, "c", "p", api.PathEvent{Type: api.PathArchived}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteContext(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx, client.FileTarget{}, "x", nil); !client.IsInvalidArgument(err) {
		t.Fatalf("empty target: %v", err)
	}
	raw, err := c.Tools(ctx, "openai")
	if err != nil || !strings.Contains(string(raw), "run_code") {
		t.Fatalf("%s %v", raw, err)
	}
	if _, err := c.SessionMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	_ = e
}

func TestTenant(t *testing.T) {
	e, c, ts := setup(t)
	got, err := c.Tenant(context.Background())
	if err != nil || got.ID != "tenant-a" {
		t.Fatalf("%+v %v", got, err)
	}
	other, err := client.New(ts.URL, client.WithAPIKey(e.KeyB)).Tenant(context.Background())
	if err != nil || other.ID != "tenant-b" {
		t.Fatalf("B's key: %+v %v", other, err)
	}
	if _, err := client.New(ts.URL).Tenant(context.Background()); client.Code(err) != errdefs.CodeUnauthenticated {
		t.Fatalf("no key: %v", err)
	}
}
