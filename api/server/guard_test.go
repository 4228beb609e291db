package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// guardEnv is a server over the real context manager (memory store, fake
// provider) and the real guard, as `sandlot serve` wires them.
type guardEnv struct {
	handler  http.Handler
	m        *contexts.Manager
	audit    chan guard.Event
	keyUser  string // tenant "user"
	keyAdmin string // tenant "admin", Admin
	keyQuiet string // tenant "quiet", GuardMode off
}

type noTools struct{}

func (noTools) Call(context.Context, tools.Call, contexts.OutputFunc) (any, error) {
	return nil, errdefs.ErrNotFound
}
func (noTools) ExportFor(string, string) (any, error) { return []any{}, nil }

func newGuardEnv(t *testing.T) *guardEnv {
	t.Helper()
	e := &guardEnv{audit: make(chan guard.Event, 1000)}
	g, err := guard.New(guard.Config{Audit: func(_ context.Context, ev guard.Event) {
		select {
		case e.audit <- ev:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{Guard: g})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	tenants := servertest.NewTenants()
	e.keyUser = tenants.Add("user")
	e.keyAdmin, err = tenant.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tenants.CreateTenant(context.Background(), &tenant.Tenant{ID: "admin", Name: "admin", Admin: true}, tenant.HashKey(e.keyAdmin))
	e.keyQuiet, _ = tenant.NewKey()
	tenants.CreateTenant(context.Background(), &tenant.Tenant{ID: "quiet", Name: "quiet", GuardMode: tenant.GuardOff}, tenant.HashKey(e.keyQuiet))
	cfg := server.Config{Contexts: m, Tools: noTools{}, Auth: tenant.NewAuthenticator(tenants, tenant.AuthConfig{CacheTTL: -1})}
	e.handler = server.New(cfg).Handler()
	e.m = m
	return e
}

// put writes a file into (tenant, "c", "main") in two appends, as the
// fake sandbox ignores write offsets.
func (e *guardEnv) put(t *testing.T, tenantID, path, data string) {
	t.Helper()
	id := contexts.Identity{TenantID: tenantID, ConversationID: "c", PathID: "main"}
	err := e.m.Use(context.Background(), id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		half := len(data) / 2
		if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: path, Data: []byte(data[:half])}); err != nil {
			return err
		}
		_, err := sb.WriteFile(ctx, agent.WriteParams{Path: path, Data: []byte(data[half:]), Append: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *guardEnv) do(t *testing.T, method, path, key, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("X-API-KEY", key)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, r)
	return w
}

// TestGuardModeHeader: X-Sandlot-Guard-Mode switches the guard for one
// request, for admin tenants only.
func TestGuardModeHeader(t *testing.T) {
	e := newGuardEnv(t)
	const file = "contact: alice.murphy@exemplar.ie\n"
	const files = "/v1/conversations/c/paths/main/files?path=contact.txt"
	for _, key := range []string{e.keyUser, e.keyAdmin} {
		if w := e.do(t, "PUT", files, key, file, nil); w.Code != 200 {
			t.Fatalf("upload: %d %s", w.Code, w.Body)
		}
	}
	mode := func(m string) map[string]string { return map[string]string{api.HeaderGuardMode: m} }
	tests := []struct {
		name   string
		key    string
		header map[string]string
		status int
		want   string
	}{
		{"user, tenant mode", e.keyUser, nil, 200, "contact: [REDACTED:EMAIL]\n"},
		{"admin, tenant mode", e.keyAdmin, nil, 200, "contact: [REDACTED:EMAIL]\n"},
		{"admin off", e.keyAdmin, mode("off"), 200, file},
		{"admin report", e.keyAdmin, mode("report"), 200, file},
		{"admin enforce", e.keyAdmin, mode("enforce"), 200, "contact: [REDACTED:EMAIL]\n"},
		{"user off is forbidden", e.keyUser, mode("off"), 403, ""},
		{"user enforce is forbidden too", e.keyUser, mode("enforce"), 403, ""},
		{"admin unknown mode", e.keyAdmin, mode("lax"), 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := e.do(t, "GET", files, tt.key, "", tt.header)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.status == 200 && w.Body.String() != tt.want {
				t.Fatalf("body %q, want %q", w.Body, tt.want)
			}
			if tt.status == 403 && strings.Contains(w.Body.String(), "alice") {
				t.Fatalf("403 leaked the file: %s", w.Body)
			}
		})
	}
}

// TestTenantGuardMode: the tenant's own mode applies to its requests. The
// guard here has no ModeFor (no store to ask): the mode comes from the
// tenant the request authenticated as, which rides in its context.
func TestTenantGuardMode(t *testing.T) {
	e := newGuardEnv(t)
	const file = "contact: alice.murphy@exemplar.ie\n"
	const files = "/v1/conversations/c/paths/main/files?path=contact.txt"
	for _, tc := range []struct {
		name, key, want string
	}{
		{"tenant off", e.keyQuiet, file},
		{"tenant default (enforce)", e.keyUser, "contact: [REDACTED:EMAIL]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := e.do(t, "PUT", files, tc.key, file, nil); w.Code != 200 {
				t.Fatalf("upload: %d %s", w.Code, w.Body)
			}
			w := e.do(t, "GET", files, tc.key, "", nil)
			if w.Code != 200 || w.Body.String() != tc.want {
				t.Fatalf("%d %q, want %q", w.Code, w.Body, tc.want)
			}
		})
	}
}

// TestDownloadSecretAcrossChunks: a secret that straddles the 1 MiB
// boundary between two ReadFile chunks is redacted whole, in enforce mode,
// and audited once at its offset in the file in report mode.
func TestDownloadSecretAcrossChunks(t *testing.T) {
	e := newGuardEnv(t)
	secret := "alice.murphy@exemplar.ie"
	line := strings.Repeat("lorem ipsum dolor sit amet ", 3) + "\n"
	var b strings.Builder
	for b.Len() < agent.ChunkSize-10 {
		b.WriteString(line)
	}
	head := b.String()[:agent.ChunkSize-10]
	head = head[:len(head)-1] + " "
	file := head + secret + " tail\n" + strings.Repeat(line, 100)
	if !(len(head) < agent.ChunkSize && len(head)+len(secret) > agent.ChunkSize) {
		t.Fatalf("the secret does not straddle the chunk boundary: %d", len(head))
	}
	const files = "/v1/conversations/c/paths/main/files?path=big.txt"
	e.put(t, "admin", "/home/user/big.txt", file)
	for len(e.audit) > 0 {
		<-e.audit
	}
	w := e.do(t, "GET", files, e.keyAdmin, "", nil)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	want := head + "[REDACTED:EMAIL]" + " tail\n" + strings.Repeat(line, 100)
	if got := w.Body.String(); got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("download differs at byte %d: got %q, want %q", i, got[max(0, i-20):min(len(got), i+40)], want[max(0, i-20):min(len(want), i+40)])
	}

	for len(e.audit) > 0 {
		<-e.audit
	}
	w = e.do(t, "GET", files, e.keyAdmin, "", map[string]string{api.HeaderGuardMode: "report"})
	if w.Code != 200 || w.Body.String() != file {
		t.Fatalf("report mode changed the file: %d, %d bytes", w.Code, w.Body.Len())
	}
	if len(e.audit) != 1 {
		t.Fatalf("%d audit events, want 1", len(e.audit))
	}
	ev := <-e.audit
	if ev.Type != "EMAIL" || ev.Start != len(head) || ev.End != len(head)+len(secret) || ev.Mode != "report" || ev.TenantID != "admin" {
		t.Fatalf("audit event %+v, want EMAIL at %d", ev, len(head))
	}

	t.Run("bytes that are not UTF-8 do not make text binary", func(t *testing.T) {
		tail := strings.Repeat("\xff", agent.ChunkSize)
		const p = "/v1/conversations/c/paths/main/files?path=blob.bin"
		e.put(t, "admin", "/home/user/blob.bin", "\x00\x01"+secret+tail)
		if w := e.do(t, "GET", p, e.keyAdmin, "", nil); w.Body.String() != "\x00\x01[REDACTED:EMAIL]"+tail {
			t.Fatalf("download: %d bytes, starting %q", w.Body.Len(), w.Body.String()[:min(w.Body.Len(), 40)])
		}
	})
	t.Run("multi-byte characters across the boundary", func(t *testing.T) {
		s := strings.Repeat("é", agent.ChunkSize/2+7) + " " + secret + "\n"
		const p = "/v1/conversations/c/paths/main/files?path=utf8.txt"
		e.put(t, "admin", "/home/user/utf8.txt", s)
		want := strings.Repeat("é", agent.ChunkSize/2+7) + " [REDACTED:EMAIL]\n"
		if w := e.do(t, "GET", p, e.keyAdmin, "", nil); w.Body.String() != want {
			t.Fatalf("utf-8 file: %d bytes, want %d", w.Body.Len(), len(want))
		}
	})
	t.Run("missing file is a 404", func(t *testing.T) {
		if w := e.do(t, "GET", "/v1/conversations/c/paths/main/files?path=nope", e.keyAdmin, "", nil); w.Code != 404 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
}
