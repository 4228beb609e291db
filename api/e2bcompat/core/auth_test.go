package e2bcompat_test

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
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

// A timeout above the maximum (24 h) is a 400, as on E2B; before, any
// timeout was taken.
func TestTimeoutMaximum(t *testing.T) {
	e := newEnv(t)
	max := int64(e2bcompat.DefaultMaxTimeout / time.Second)
	over := strings.NewReplacer("N", itoa(max+1))
	sb := e.Create(key1, `{"timeout":`+itoa(max)+`}`)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v2/sandboxes", `{"timeout":N}`},
		{"POST", "/sandboxes", `{"timeout":N}`},
		{"POST", "/sandboxes/" + sb.SandboxID + "/timeout", `{"timeout":N}`},
		{"POST", "/sandboxes/" + sb.SandboxID + "/refreshes", `{"duration":N}`},
		{"POST", "/v2/sandboxes/" + sb.SandboxID + "/connect", `{"timeout":N}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp := e.Do(tc.method, tc.path, strings.NewReader(over.Replace(tc.body)), "X-API-KEY", key1)
			got := decode[apiErr](t, resp)
			if resp.StatusCode != 400 || got.Code != 400 || !strings.Contains(got.Message, "24 hours") {
				t.Fatalf("status %d %+v, want 400 naming the maximum", resp.StatusCode, got)
			}
		})
	}
	if resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", strings.NewReader(`{"timeout":`+itoa(max)+`}`), "X-API-KEY", key1); resp.StatusCode != 204 {
		t.Fatalf("timeout at the maximum: %d", resp.StatusCode)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestTenantInContext: every manager call an E2B request makes carries the
// authenticated tenant in its context (tenant.From), whether the request
// came with the API key, the envd token or the traffic token, so the
// guard reads the tenant's mode from the request instead of the store.
// Before, E2B scoped contexts by id only.
func TestTenantInContext(t *testing.T) {
	var rec *tenantCheck
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Wrap: func(m *contexts.Manager) e2bcompat.Manager {
		rec = &tenantCheck{Manager: m}
		return rec
	}})
	sb := e.Create(key1, `{}`)
	steps := []struct {
		method, path, body string
		hdr                []string
	}{
		{"POST", "/execute", `{"code":"x"}`, []string{"E2b-Sandbox-Port", "49999", "X-Access-Token", sb.EnvdAccessToken}},
		{"POST", "/contexts", `{"language":"python"}`, []string{"E2b-Sandbox-Port", "49999", "E2B-Traffic-Access-Token", sb.TrafficAccessToken}},
		{"POST", "/files?path=/home/user/a.txt", "hello", []string{"E2b-Sandbox-Port", "49983", "X-API-KEY", key1, "Content-Type", "application/octet-stream"}},
		{"GET", "/files?path=/home/user/a.txt", "", []string{"E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken}},
	}
	for _, s := range steps {
		var body io.Reader
		if s.body != "" {
			body = strings.NewReader(s.body)
		}
		resp := e.Do(s.method, s.path, body, append([]string{"E2b-Sandbox-Id", sb.SandboxID}, s.hdr...)...)
		if resp.StatusCode >= 300 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %s: %d %s", s.method, s.path, resp.StatusCode, b)
		}
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v2/sandboxes"}, {"GET", "/sandboxes/" + sb.SandboxID}, {"DELETE", "/sandboxes/" + sb.SandboxID},
	} {
		if resp := e.Do(c.method, c.path, nil, "X-API-KEY", key1); resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
	if missing := rec.missing(); len(missing) > 0 {
		t.Errorf("manager calls without the authenticated tenant in their context: %v", missing)
	}
}

// tenantCheck is the real manager recording the calls whose context does
// not carry the authenticated tenant (tenant.From).
type tenantCheck struct {
	*contexts.Manager
	mu      sync.Mutex
	without []string
}

func (c *tenantCheck) check(ctx context.Context, method string) {
	if _, ok := tenant.From(ctx); !ok {
		c.mu.Lock()
		c.without = append(c.without, method)
		c.mu.Unlock()
	}
}

func (c *tenantCheck) missing() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.without)
}

func (c *tenantCheck) GetOrCreate(ctx context.Context, id contexts.Identity, opts contexts.CreateOptions) (*contexts.Record, error) {
	c.check(ctx, "GetOrCreate")
	return c.Manager.GetOrCreate(ctx, id, opts)
}

func (c *tenantCheck) Execute(ctx context.Context, id contexts.Identity, req contexts.ExecuteRequest, out contexts.OutputFunc) (*contexts.ExecuteResult, error) {
	c.check(ctx, "Execute")
	return c.Manager.Execute(ctx, id, req, out)
}

func (c *tenantCheck) Use(ctx context.Context, id contexts.Identity, opts contexts.CreateOptions, fn func(context.Context, *contexts.Record, contexts.Sandbox) error) error {
	c.check(ctx, "Use")
	return c.Manager.Use(ctx, id, opts, fn)
}

func (c *tenantCheck) Get(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	c.check(ctx, "Get")
	return c.Manager.Get(ctx, tenantID, id)
}

func (c *tenantCheck) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	c.check(ctx, "List")
	return c.Manager.List(ctx, f)
}

func (c *tenantCheck) Terminate(ctx context.Context, tenantID, id string, reason contexts.Reason) error {
	c.check(ctx, "Terminate")
	return c.Manager.Terminate(ctx, tenantID, id, reason)
}

func (c *tenantCheck) SetTTL(ctx context.Context, tenantID, id string, ttl time.Duration) (*contexts.Record, error) {
	c.check(ctx, "SetTTL")
	return c.Manager.SetTTL(ctx, tenantID, id, ttl)
}

func (c *tenantCheck) Pause(ctx context.Context, tenantID, id string, keep time.Duration) (*contexts.Record, error) {
	c.check(ctx, "Pause")
	return c.Manager.Pause(ctx, tenantID, id, keep)
}

func (c *tenantCheck) Resume(ctx context.Context, tenantID, id string, ttl time.Duration) (*contexts.Record, error) {
	c.check(ctx, "Resume")
	return c.Manager.Resume(ctx, tenantID, id, ttl)
}

func (c *tenantCheck) AutoPause(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	c.check(ctx, "AutoPause")
	return c.Manager.AutoPause(ctx, tenantID, id)
}

func (c *tenantCheck) Usage(ctx context.Context, tenantID, id string) (contexts.ResourceUsage, error) {
	c.check(ctx, "Usage")
	return c.Manager.Usage(ctx, tenantID, id)
}
