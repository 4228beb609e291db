package e2bcompat_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		path, sid string
		want      bool
	}{
		{"/sandboxes", "", true},
		{"/sandboxes/abc/timeout", "", true},
		{"/v2/sandboxes", "", true},
		{"/v2/sandboxes/abc/connect", "", true},
		{"/process.Process/Start", "abc", true},
		{"/files", "abc", true},
		{"/files", "", false},
		{"/sandboxesX", "", false},
		{"/v1/contexts", "", false},
		{"/v3/templates", "", true},
		{"/v2/templates/t/builds/b", "", true},
		{"/templates/aliases/x", "", true},
		{"/v1/templates", "", false},
		{"/snapshots", "", true},
		{"/v1/snapshots", "", false},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		if tc.sid != "" {
			r.Header.Set("E2b-Sandbox-Id", tc.sid)
		}
		if got := e2bcompat.Match(r); got != tc.want {
			t.Errorf("Match(%s, sid=%q) = %v, want %v", tc.path, tc.sid, got, tc.want)
		}
	}
}

// Routes outside Connect and uploads do not decode Content-Encoding: the
// bytes would be taken as they are, so a compressed body is refused.
func TestCompressedBodyOutsideConnect(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hello"))
	zw.Close()
	resp := e.Do("POST", "/execute", bytes.NewReader(gz.Bytes()), append(e.Headers(sb, "49999"),
		"Content-Type", "application/json", "Content-Encoding", "gzip")...)
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("execute: status %d %s, want 415", resp.StatusCode, b)
	}
	resp = e.Do("POST", "/v2/sandboxes", bytes.NewReader(gz.Bytes()), "X-API-KEY", key1, "Content-Encoding", "gzip")
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("control plane: status %d, want 415", resp.StatusCode)
	}
}

// A tenant over its in-flight limit (Config.Admit) gets 429 with
// Retry-After on the control plane and on sandbox calls.
func TestAdmitRefuses(t *testing.T) {
	var full atomic.Bool
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{
		Admit: func(ctx context.Context, tenantID string) (func(), error) {
			if full.Load() {
				return nil, fmt.Errorf("tenant %s is busy: %w", tenantID, errdefs.ErrResourceExhausted)
			}
			return func() {}, nil
		}}})
	sb := e.Create(key1, `{}`)
	full.Store(true)
	for _, resp := range []*http.Response{
		e.Do("GET", "/v2/sandboxes", nil, "X-API-KEY", key1),
		e.Do("GET", "/health", nil, e.Headers(sb, "49983")...),
		e.Do("POST", "/execute", strings.NewReader(`{"code":"x"}`), e.Headers(sb, "49999")...),
	} {
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d Retry-After=%q", resp.Request.URL.Path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}

// TestExpiredSandboxIsGone: once a sandbox's timeout has passed (before the
// cleanup loop ends its record), runCode and envd calls answer "sandbox
// gone" instead of silently running in a fresh sandbox.
func TestExpiredSandboxIsGone(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e, p := newManagerEnv(t, contexts.Config{Clock: clock, CleanupInterval: time.Hour})
	sb := e.Create(key1, `{"timeout":60}`)
	if resp := e.Do("POST", "/execute", strings.NewReader(`{"code":"1"}`), e.Headers(sb, "49999")...); resp.StatusCode != 200 {
		t.Fatalf("runCode: %d", resp.StatusCode)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	resp := e.Do("POST", "/execute", strings.NewReader(`{"code":"1"}`), e.Headers(sb, "49999")...)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 404 || !strings.Contains(string(b), "The sandbox was not found") {
		t.Fatalf("runCode on an expired sandbox: %d %s, want 404 as E2B", resp.StatusCode, b)
	}
	resp = e.Do("POST", "/filesystem.Filesystem/Stat", strings.NewReader(`{"path":"/home/user"}`),
		append(e.Headers(sb, "49983"), "Content-Type", "application/json")...)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode == 200 {
		t.Fatalf("envd call on an expired sandbox: %d %s", resp.StatusCode, b)
	}
	if p.Created() != 1 {
		t.Fatalf("%d sandboxes created: a call on an expired sandbox started a fresh one", p.Created())
	}
}

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

func (c *tenantCheck) Served(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	c.check(ctx, "Served")
	return c.Manager.Served(ctx, tenantID, id)
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
