package e2bcompattest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
)

// Two API keys, of tenant-1 and tenant-2 (KeyTenants).
const (
	Key1 = "e2b_1111111111111111111111111111111111111111"
	Key2 = "e2b_2222222222222222222222222222222222222222"
)

// KeyTenants knows Key1 and Key2.
var KeyTenants = Tenants{Key1: "tenant-1", Key2: "tenant-2"}

// Options configures an Env.
type Options struct {
	// Config is the handler's. Unset, Manager is the Env's manager,
	// Tenants KeyTenants and Secret a fixed test secret.
	Config e2bcompat.Config
	// Manager configures the real manager. Zero PoolSize means no warm
	// pool (-1); no Templates and no Catalog: the templates E2B's names map
	// to (default and code-interpreter).
	Manager contexts.Config
	// Provider runs the manager's sandboxes; nil: a new Provider (Env.P).
	Provider contexts.Provider
	// Wrap, when set, wraps the manager the handler is given (a test that
	// records the calls the edge makes).
	Wrap func(*contexts.Manager) e2bcompat.Manager
}

// Env is the E2B handler over a real contexts.Manager on the memory store,
// served over HTTP.
type Env struct {
	T   testing.TB
	Srv *httptest.Server
	H   *e2bcompat.Handler
	M   *contexts.Manager
	// P is the provider when Options.Provider was nil.
	P *Provider
}

// NewEnv starts an Env; the test's cleanups stop it.
func NewEnv(t testing.TB, o Options) *Env {
	t.Helper()
	e := &Env{T: t}
	prov := o.Provider
	if prov == nil {
		e.P = NewProvider()
		prov = e.P
	}
	mcfg := o.Manager
	if mcfg.PoolSize == 0 {
		mcfg.PoolSize = -1
	}
	if mcfg.Templates == nil && mcfg.Catalog == nil {
		mcfg.Templates = []string{templates.Default, templates.CodeInterpreter}
	}
	e.M = contexts.NewManager(memory.New(), prov, mcfg)
	if err := e.M.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.M.Close(context.Background()) })
	cfg := o.Config
	if cfg.Manager == nil {
		cfg.Manager = e.M
		if o.Wrap != nil {
			cfg.Manager = o.Wrap(e.M)
		}
	}
	if cfg.Tenants == nil {
		cfg.Tenants = KeyTenants
	}
	if cfg.Secret == nil {
		cfg.Secret = []byte("test-secret")
	}
	e.H = e2bcompat.New(cfg)
	e.Srv = httptest.NewServer(e.H)
	t.Cleanup(e.Srv.Close)
	return e
}

// Do sends a request; hdr is pairs of header names and values. The
// response body is closed when the test ends.
func (e *Env) Do(method, path string, body io.Reader, hdr ...string) *http.Response {
	e.T.Helper()
	req, err := http.NewRequest(method, e.Srv.URL+path, body)
	if err != nil {
		e.T.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Created is the answer of a create.
type Created struct {
	SandboxID, TemplateID, ClientID, EnvdVersion, EnvdAccessToken, TrafficAccessToken string
}

// Create creates a sandbox with key and the JSON body; anything but 201
// fails the test.
func (e *Env) Create(key string, body string) Created {
	e.T.Helper()
	resp := e.Do("POST", "/v2/sandboxes", strings.NewReader(body), "X-API-KEY", key, "Content-Type", "application/json")
	if resp.StatusCode != 201 {
		b, _ := io.ReadAll(resp.Body)
		e.T.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	return Decode[Created](e.T, resp)
}

// Headers are the headers of a call to port of sb with its envd token.
func (e *Env) Headers(sb Created, port string) []string {
	return []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", port, "X-Access-Token", sb.EnvdAccessToken}
}

// Decode reads resp's body as JSON into a T.
func Decode[T any](t testing.TB, resp *http.Response) T {
	t.Helper()
	var v T
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// APIError is the control plane's error body.
type APIError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}
