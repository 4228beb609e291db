// Package servertest holds hand-written in-memory fakes of what api/server
// consumes (tenant store, contexts manager, sandbox, tool registry), for
// tests of the server, the client and the CLI. The fake run_code kernel
// understands "x=v" (set), "print(x)" (print), "fail" (an internal error);
// any other line is echoed. Each output line is one streamed event.
package servertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// Tenants is an in-memory tenant.Store.
type Tenants struct {
	mu     sync.Mutex
	byHash map[string]*tenant.Tenant
	Fail   error // returned by every lookup when set
}

var _ tenant.Store = (*Tenants)(nil)

func NewTenants() *Tenants { return &Tenants{byHash: map[string]*tenant.Tenant{}} }

// Add creates a tenant and returns its key.
func (f *Tenants) Add(id string) string {
	key, err := tenant.NewKey()
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byHash[tenant.HashKey(key)] = &tenant.Tenant{ID: id, Name: id, KeyPrefix: tenant.Prefix(key)}
	return key
}

// AddAdmin adds an admin tenant (tenant.Tenant.Admin) and returns its key.
func (f *Tenants) AddAdmin(id string) string {
	key := f.Add(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byHash[tenant.HashKey(key)].Admin = true
	return key
}

func (f *Tenants) CreateTenant(ctx context.Context, t *tenant.Tenant, keyHash string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byHash[keyHash] = t
	return nil
}

func (f *Tenants) TenantByKeyHash(ctx context.Context, keyHash string) (*tenant.Tenant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Fail != nil {
		return nil, f.Fail
	}
	t, ok := f.byHash[keyHash]
	if !ok {
		return nil, errdefs.ErrNotFound
	}
	return t, nil
}

func (f *Tenants) GetTenant(ctx context.Context, id string) (*tenant.Tenant, error) {
	return nil, errdefs.ErrNotFound
}
func (f *Tenants) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) { return nil, nil }
func (f *Tenants) SetKey(ctx context.Context, id, keyHash, keyPrefix string) error {
	return nil
}
func (f *Tenants) UpdateTenant(ctx context.Context, t *tenant.Tenant) error { return nil }
func (f *Tenants) DeleteTenant(ctx context.Context, id string) error        { return nil }

// Sandbox keeps files in memory; the methods the server does not use
// panic through the nil embedded interface.
type Sandbox struct {
	contexts.Sandbox
	id    string
	mu    sync.Mutex
	Files map[string][]byte
	vars  map[string]string // the fake kernel's state
}

func (s *Sandbox) ID() string { return s.id }

// Exec is a process that prints its command line and exits 0 (after
// its start event, as the agent sends it).
func (s *Sandbox) Exec(ctx context.Context, p agent.ExecParams, out contexts.OutputFunc) (*agent.ExecResult, error) {
	line := strings.Join(p.Argv, " ") + p.Shell + "\n"
	if out != nil {
		out(agent.OutputEvent{Stream: agent.Start, PID: 7})
		out(agent.OutputEvent{Stream: agent.Stdout, Data: line})
	}
	return &agent.ExecResult{PID: 7, Stdout: line}, nil
}

// Stdin and Signal reach the fake process (which has ended).
func (s *Sandbox) Stdin(context.Context, agent.StdinParams) error   { return nil }
func (s *Sandbox) Signal(context.Context, agent.SignalParams) error { return nil }

func (s *Sandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.Files[p.Path]
	if p.Offset == 0 && !p.Append {
		cur = nil
	}
	if int64(len(cur)) < p.Offset {
		return nil, fmt.Errorf("write past the end: %w", errdefs.ErrInvalidArgument)
	}
	cur = append(cur[:p.Offset:p.Offset], p.Data...)
	s.Files[p.Path] = cur
	return &agent.FileInfo{Name: p.Path[strings.LastIndex(p.Path, "/")+1:], Path: p.Path, Type: "file", Size: int64(len(cur))}, nil
}

func (s *Sandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.Files[p.Path]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p.Path, errdefs.ErrNotFound)
	}
	lim := p.Limit
	if lim == 0 {
		lim = agent.ChunkSize
	}
	end := min(p.Offset+lim, int64(len(b)))
	return &agent.ReadResult{Data: b[p.Offset:end], Size: int64(len(b)), EOF: end == int64(len(b))}, nil
}

func (s *Sandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []agent.FileInfo
	for name, b := range s.Files {
		if strings.HasPrefix(name, p.Path+"/") {
			out = append(out, agent.FileInfo{Name: name[len(p.Path)+1:], Path: name, Type: "file", Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (s *Sandbox) Remove(ctx context.Context, p agent.RemoveParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.Files, p.Path)
	return nil
}

// Contexts is a tenant-scoped in-memory manager.
type Contexts struct {
	mu        sync.Mutex
	recs      map[string]*contexts.Record
	Sandboxes map[string]*Sandbox // by context id
	Events    []contexts.PathEvent
	n         int
	FailAll   error
	// Counters, when set, is what Stats returns; else Stats counts the
	// contexts created.
	Counters *contexts.Stats
	// TenantCounters, when set, is what TenantStats returns per tenant;
	// else TenantStats counts the tenant's contexts created.
	TenantCounters map[string]contexts.Stats
}

var _ server.Contexts = (*Contexts)(nil)

func NewContexts() *Contexts {
	return &Contexts{recs: map[string]*contexts.Record{}, Sandboxes: map[string]*Sandbox{}}
}

func (f *Contexts) Get(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailAll != nil {
		return nil, f.FailAll
	}
	r, ok := f.recs[id]
	if !ok || r.TenantID != tenantID {
		return nil, fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound)
	}
	cp := *r
	return &cp, nil
}

func (f *Contexts) List(ctx context.Context, flt contexts.Filter) ([]*contexts.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailAll != nil {
		return nil, f.FailAll
	}
	var out []*contexts.Record
	for _, r := range f.recs {
		if flt.TenantID != "" && r.TenantID != flt.TenantID {
			continue
		}
		if (flt.UserID != "" || flt.ByUser) && r.UserID != flt.UserID {
			continue
		}
		if flt.ConversationID != "" && r.ConversationID != flt.ConversationID {
			continue
		}
		if flt.PathID != "" && r.PathID != flt.PathID {
			continue
		}
		if len(flt.States) > 0 && !containsState(flt.States, r.State) {
			continue
		}
		cp := *r
		out = append(out, &cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	for len(out) > 0 && flt.After != "" && out[0].ID <= flt.After {
		out = out[1:]
	}
	if flt.Limit > 0 && len(out) > flt.Limit {
		out = out[:flt.Limit]
	}
	return out, nil
}

func containsState(ss []contexts.State, s contexts.State) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (f *Contexts) Terminate(ctx context.Context, tenantID, id string, reason contexts.Reason) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok || r.TenantID != tenantID {
		return fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound)
	}
	r.State, r.Reason = contexts.StateTerminated, reason
	return nil
}

// Suspend marks the context suspended, as the manager's record says it.
func (f *Contexts) Suspend(ctx context.Context, tenantID, id string, keep time.Duration) (*contexts.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok || r.TenantID != tenantID || !r.State.Active() {
		return nil, fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound)
	}
	if r.Suspended() {
		return nil, fmt.Errorf("context %s: %w", id, contexts.ErrSuspended)
	}
	now := time.Now()
	r.PausedAt, r.SuspendImage, r.SandboxID = &now, "suspended-"+id, ""
	return r.Clone(), nil
}

func (f *Contexts) active(id contexts.Identity) *contexts.Record {
	for _, r := range f.recs {
		if r.Identity == id && r.State.Active() {
			return r
		}
	}
	return nil
}

func (f *Contexts) PathEvent(ctx context.Context, id contexts.Identity, ev contexts.PathEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Events = append(f.Events, ev)
	if ev.Type == contexts.PathDeleted {
		if r := f.active(id); r != nil {
			r.State, r.Reason = contexts.StateTerminated, contexts.ReasonDeleted
		}
	}
	return nil
}

func (f *Contexts) EndConversation(ctx context.Context, tenantID, userID, conversationID string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailAll != nil {
		return 0, f.FailAll
	}
	n := 0
	for _, r := range f.recs {
		if r.TenantID == tenantID && r.UserID == userID && r.ConversationID == conversationID && r.State.Active() {
			r.State, r.Reason = contexts.StateTerminated, contexts.ReasonDeleted
			n++
		}
	}
	return n, nil
}

func (f *Contexts) Use(ctx context.Context, id contexts.Identity, _ contexts.CreateOptions, fn func(context.Context, *contexts.Record, contexts.Sandbox) error) error {
	f.mu.Lock()
	if f.FailAll != nil {
		f.mu.Unlock()
		return f.FailAll
	}
	r := f.active(id)
	if r == nil {
		f.n++
		r = &contexts.Record{ID: fmt.Sprintf("ctx-%04d", f.n), Identity: id, State: contexts.StateReady,
			SandboxID: fmt.Sprintf("sb-%04d", f.n), CreatedAt: time.Now()}
		f.recs[r.ID] = r
		f.Sandboxes[r.ID] = &Sandbox{id: r.SandboxID, Files: map[string][]byte{}, vars: map[string]string{}}
	}
	cp := *r
	sb := f.Sandboxes[r.ID]
	f.mu.Unlock()
	return fn(ctx, &cp, sb)
}

// File returns a file of a context's fake sandbox.
func (f *Contexts) File(contextID, path string) ([]byte, bool) {
	f.mu.Lock()
	sb := f.Sandboxes[contextID]
	f.mu.Unlock()
	if sb == nil {
		return nil, false
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	b, ok := sb.Files[path]
	return b, ok
}

func (f *Contexts) Stats() contexts.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Counters != nil {
		return *f.Counters
	}
	return contexts.Stats{TotalCreated: int64(f.n)}
}

func (f *Contexts) TenantStats(tenantID string) contexts.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.TenantCounters != nil {
		return f.TenantCounters[tenantID]
	}
	var st contexts.Stats
	for _, r := range f.recs {
		if r.TenantID == tenantID {
			st.TotalCreated++
		}
	}
	return st
}

// Tools implements run_code the way the registry and manager validate
// it, on a toy kernel: "x=v" sets a variable, "print(x)" prints it, any
// other line is echoed; each line is one streamed stdout chunk.
type Tools struct {
	Contexts *Contexts
	// Fail, when set, is returned by Call.
	Fail error
	// Hook, when set, runs at the start of Call (to hold a call in flight).
	Hook func()
}

var _ server.Tools = (*Tools)(nil)

func (t *Tools) ExportFor(format, request string) (any, error) {
	switch format {
	case "", "openai", "anthropic", "mcp":
		return []map[string]string{{"name": "run_code", "format": format}}, nil
	}
	return nil, fmt.Errorf("unknown format %q: %w", format, errdefs.ErrInvalidArgument)
}

func (t *Tools) Call(ctx context.Context, c tools.Call, out contexts.OutputFunc) (any, error) {
	if t.Hook != nil {
		t.Hook()
	}
	if t.Fail != nil {
		return nil, t.Fail
	}
	if c.Name != "run_code" {
		return nil, fmt.Errorf("tool %q: %w", c.Name, errdefs.ErrNotFound)
	}
	var a api.RunCodeArgs
	dec := json.NewDecoder(strings.NewReader(string(c.Args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("run_code args: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	switch {
	case a.Language != "python" && a.Language != "bash":
		return nil, fmt.Errorf("unknown language %q: %w", a.Language, errdefs.ErrInvalidArgument)
	case len(a.Code) > 100<<10:
		return nil, fmt.Errorf("code is over 100 KB: %w", errdefs.ErrInvalidArgument)
	case a.Timeout != 0 && (a.Timeout < 1000 || a.Timeout > 600000):
		return nil, fmt.Errorf("timeout out of range: %w", errdefs.ErrInvalidArgument)
	}
	var res *api.RunCodeResult
	err := t.Contexts.Use(ctx, c.Identity, contexts.CreateOptions{}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		fs := sb.(*Sandbox)
		var stdout strings.Builder
		for _, line := range strings.Split(a.Code, "\n") {
			var o string
			if k, v, ok := strings.Cut(line, "="); ok {
				fs.mu.Lock()
				fs.vars[k] = v
				fs.mu.Unlock()
				continue
			} else if strings.HasPrefix(line, "print(") {
				fs.mu.Lock()
				o = fs.vars[strings.TrimSuffix(strings.TrimPrefix(line, "print("), ")")] + "\n"
				fs.mu.Unlock()
			} else if line == "fail" {
				return errors.New("kernel exploded at /var/lib/secret")
			} else {
				o = line + "\n"
			}
			stdout.WriteString(o)
			if out != nil {
				out(agent.OutputEvent{Stream: agent.Stdout, Data: o})
			}
		}
		res = &api.RunCodeResult{Success: true, Stdout: stdout.String(), SandboxID: rec.SandboxID,
			PathRef: api.PathRef{UserID: c.Identity.UserID, ConversationID: c.Identity.ConversationID, PathID: c.Identity.PathID}}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Env is a server over fresh fakes, with two tenants: "tenant-a" (KeyA)
// and "tenant-b" (KeyB).
type Env struct {
	// Config is what Server was built with (fakes wired in), for tests
	// that build another server or a front door over the same fakes.
	Config   server.Config
	Server   *server.Server
	Handler  http.Handler
	Contexts *Contexts
	Tools    *Tools
	Tenants  *Tenants
	KeyA     string
	KeyB     string
	// Audit is the trail GET /v1/audit lists (all tenants; the server's
	// Config.Audit filters by tenant, newest last here, newest first out).
	Audit []audit.Event
}

// NewEnv builds an Env; mod (may be nil) adjusts the config first.
func NewEnv(mod func(*server.Config)) *Env {
	e := &Env{Contexts: NewContexts(), Tenants: NewTenants()}
	e.Tools = &Tools{Contexts: e.Contexts}
	e.KeyA = e.Tenants.Add("tenant-a")
	e.KeyB = e.Tenants.Add("tenant-b")
	cfg := server.Config{Contexts: e.Contexts, Tools: e.Tools, Auth: tenant.NewAuthenticator(e.Tenants, tenant.AuthConfig{}),
		Audit: func(ctx context.Context, tenantID, kind string, limit int) ([]audit.Event, error) {
			var out []audit.Event
			for i := len(e.Audit) - 1; i >= 0 && len(out) < limit; i-- {
				if e.Audit[i].TenantID == tenantID && (kind == "" || e.Audit[i].Kind == kind) {
					out = append(out, e.Audit[i])
				}
			}
			return out, nil
		}}
	if mod != nil {
		mod(&cfg)
	}
	e.Config = cfg
	e.Server = server.New(cfg)
	e.Handler = e.Server.Handler()
	return e
}
