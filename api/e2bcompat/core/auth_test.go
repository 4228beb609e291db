package core_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
)

type createdTokens struct {
	SandboxID, EnvdAccessToken, TrafficAccessToken string
}

// The code interpreter's routes used to answer with the sandbox id alone
// once any authenticated call had named it. Every route now wants a
// credential: the envd token, the traffic token (interpreter port only,
// which is what the SDK sends on /contexts) or the API key.
func TestInterpreterAuth(t *testing.T) {
	e := newEnv(t)
	resp := e.Do("POST", "/v2/sandboxes", strings.NewReader(`{}`), "X-API-KEY", key1)
	sb := decode[createdTokens](t, resp)
	other := decode[createdTokens](t, e.Do("POST", "/v2/sandboxes", strings.NewReader(`{}`), "X-API-KEY", key1))
	// An authenticated create and run on the sandbox, as the SDK does
	// first; the old handler then trusted bare calls on that id.
	e.Do("POST", "/execute", strings.NewReader(`{"code":"x"}`), "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999", "X-Access-Token", sb.EnvdAccessToken)
	cc := decode[map[string]string](t, e.Do("POST", "/contexts", strings.NewReader(`{"language":"python"}`),
		"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999", "X-Access-Token", sb.EnvdAccessToken))
	if cc["id"] == "" {
		t.Fatalf("create context: %v", cc)
	}
	routes := []struct{ method, path, body string }{
		{"POST", "/contexts", `{"language":"python"}`},
		{"GET", "/contexts", ""},
		{"POST", "/contexts/" + cc["id"] + "/restart", ""},
		{"DELETE", "/contexts/" + cc["id"], ""},
		{"POST", "/execute", `{"code":"x"}`},
		{"GET", "/health", ""},
	}
	creds := []struct {
		name string
		hdr  []string
		want int
	}{
		{"anonymous", nil, 401},
		{"traffic token of another sandbox", []string{"E2B-Traffic-Access-Token", other.TrafficAccessToken}, 401},
		{"envd token of another sandbox", []string{"X-Access-Token", other.EnvdAccessToken}, 401},
		{"traffic token in the envd header", []string{"X-Access-Token", sb.TrafficAccessToken}, 401},
		{"garbage", []string{"E2B-Traffic-Access-Token", "sl2.x.y"}, 401},
		{"other tenant's key", []string{"X-API-KEY", key2}, 404}, // as for a sandbox that is not there (the interpreter port's answer)
	}
	for _, rt := range routes {
		for _, c := range creds {
			t.Run(rt.method+" "+rt.path+" "+c.name, func(t *testing.T) {
				var body io.Reader
				if rt.body != "" {
					body = strings.NewReader(rt.body)
				}
				hdr := append([]string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999", "Content-Type", "application/json"}, c.hdr...)
				resp := e.Do(rt.method, rt.path, body, hdr...)
				if resp.StatusCode != c.want {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("status %d %s, want %d", resp.StatusCode, b, c.want)
				}
			})
		}
	}
	if sb.TrafficAccessToken == "" || sb.TrafficAccessToken == sb.EnvdAccessToken {
		t.Fatalf("create answer has no traffic token of its own: %+v", sb)
	}
	// The traffic token opens the interpreter port only.
	if resp := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "E2B-Traffic-Access-Token", sb.TrafficAccessToken); resp.StatusCode != 401 {
		t.Fatalf("traffic token on envd: %d", resp.StatusCode)
	}
	for _, hdr := range [][]string{
		{"E2B-Traffic-Access-Token", sb.TrafficAccessToken},
		{"X-Access-Token", sb.EnvdAccessToken},
		{"X-API-KEY", key1},
	} {
		if resp := e.Do("GET", "/contexts", nil, append([]string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999"}, hdr...)...); resp.StatusCode != 200 {
			t.Fatalf("list contexts with %s: %d", hdr[0], resp.StatusCode)
		}
	}
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// storeEnv serves the handler over a tenant store, as the daemon does.
func storeEnv(t *testing.T) (*env, *memory.Store, *clock, string) {
	t.Helper()
	st := memory.New()
	key, _ := tenant.NewKey()
	tn := &tenant.Tenant{Name: "a"}
	if err := st.CreateTenant(context.Background(), tn, tenant.HashKey(key)); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{
		Clock:   clk.Now,
		Tenants: tenant.NewAuthenticator(st, tenant.AuthConfig{Clock: clk.Now}),
	}})
	return e, st, clk, tn.ID
}

// Tokens expire, die with a key rotation and with their tenant. Before,
// a token was an HMAC of tenant and sandbox id, valid forever.
func TestTokenRevocation(t *testing.T) {
	probe := func(e *env, sb createdTokens) (envd, traffic int) {
		r1 := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken)
		r2 := e.Do("GET", "/contexts", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999", "E2B-Traffic-Access-Token", sb.TrafficAccessToken)
		return r1.StatusCode, r2.StatusCode
	}
	create := func(e *env, key string) createdTokens {
		resp := e.Do("POST", "/v2/sandboxes", strings.NewReader(`{}`), "X-API-KEY", key)
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d", resp.StatusCode)
		}
		return decode[createdTokens](t, resp)
	}
	t.Run("expiry", func(t *testing.T) {
		e, st, clk, id := storeEnv(t)
		key := rotate(t, st, id)
		sb := create(e, key)
		if a, b := probe(e, sb); a != 204 || b != 200 {
			t.Fatalf("fresh tokens: %d %d", a, b)
		}
		clk.add(e2bcompat.DefaultTokenTTL + time.Second)
		if a, b := probe(e, sb); a != 401 || b != 401 {
			t.Fatalf("expired tokens: %d %d, want 401", a, b)
		}
		// connect hands out fresh ones
		resp := e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{}`), "X-API-KEY", key)
		if a, b := probe(e, decode[createdTokens](t, resp)); a != 204 || b != 200 {
			t.Fatalf("tokens from connect: %d %d", a, b)
		}
	})
	t.Run("key rotation", func(t *testing.T) {
		e, st, clk, id := storeEnv(t)
		key := rotate(t, st, id)
		sb := create(e, key)
		newKey := rotate(t, st, id)
		clk.add(2 * time.Second) // past the tenant cache
		if a, b := probe(e, sb); a != 401 || b != 401 {
			t.Fatalf("tokens after rotation: %d %d, want 401", a, b)
		}
		resp := e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{}`), "X-API-KEY", newKey)
		if a, b := probe(e, decode[createdTokens](t, resp)); a != 204 || b != 200 {
			t.Fatalf("tokens of the new key: %d %d", a, b)
		}
	})
	t.Run("tenant deleted", func(t *testing.T) {
		e, st, clk, id := storeEnv(t)
		key := rotate(t, st, id)
		sb := create(e, key)
		if err := st.DeleteTenant(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		clk.add(2 * time.Second)
		if a, b := probe(e, sb); a != 401 || b != 401 {
			t.Fatalf("tokens after deletion: %d %d, want 401", a, b)
		}
		// A tenant re-created under the same id is another tenant.
		k, _ := tenant.NewKey()
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id, CreatedAt: clk.Now().Add(time.Minute)}, tenant.HashKey(k)); err != nil {
			t.Fatal(err)
		}
		if a, b := probe(e, sb); a != 401 || b != 401 {
			t.Fatalf("tokens after re-creation: %d %d, want 401", a, b)
		}
	})
}

// rotate gives tenant id a new key and returns it.
func rotate(t *testing.T, st *memory.Store, id string) string {
	t.Helper()
	k, _ := tenant.NewKey()
	if err := st.SetKey(context.Background(), id, tenant.HashKey(k), tenant.Prefix(k)); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSandboxAuth(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	other := e.Create(key2, `{}`)
	for _, tc := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"token", e.Headers(sb, "49983"), 204},
		{"api key", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-API-KEY", key1}, 204},
		{"nothing", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983"}, 401},
		{"token of another sandbox", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", other.EnvdAccessToken}, 401},
		{"other tenant key", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-API-KEY", key2}, 502},
		{"unknown port", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "8080", "X-Access-Token", sb.EnvdAccessToken}, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.Do("GET", "/health", nil, tc.hdr...)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want >= 400 {
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Fatalf("error content type %q", ct)
				}
			}
		})
	}
}
