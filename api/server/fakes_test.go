package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// fakeTenants is an in-memory tenant.Store.
type fakeTenants struct {
	mu     sync.Mutex
	byHash map[string]*tenant.Tenant
	fail   error // returned by every lookup when set
}

var _ tenant.Store = (*fakeTenants)(nil)

func newFakeTenants() *fakeTenants { return &fakeTenants{byHash: map[string]*tenant.Tenant{}} }

// add creates a tenant and returns its key.
func (f *fakeTenants) add(id string) string {
	key, err := tenant.NewKey()
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byHash[tenant.HashKey(key)] = &tenant.Tenant{ID: id, Name: id, KeyPrefix: tenant.Prefix(key)}
	return key
}

func (f *fakeTenants) CreateTenant(ctx context.Context, t *tenant.Tenant, keyHash string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byHash[keyHash] = t
	return nil
}

func (f *fakeTenants) TenantByKeyHash(ctx context.Context, keyHash string) (*tenant.Tenant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	t, ok := f.byHash[keyHash]
	if !ok {
		return nil, errdefs.ErrNotFound
	}
	return t, nil
}

func (f *fakeTenants) GetTenant(ctx context.Context, id string) (*tenant.Tenant, error) {
	return nil, errdefs.ErrNotFound
}
func (f *fakeTenants) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) { return nil, nil }
func (f *fakeTenants) SetKey(ctx context.Context, id, keyHash, keyPrefix string) error {
	return nil
}
func (f *fakeTenants) UpdateTenant(ctx context.Context, t *tenant.Tenant) error { return nil }
func (f *fakeTenants) DeleteTenant(ctx context.Context, id string) error        { return nil }

// fakeSandbox keeps files in memory; the methods the server does not use
// panic through the nil embedded interface.
type fakeSandbox struct {
	contexts.Sandbox
	id    string
	mu    sync.Mutex
	files map[string][]byte
	vars  map[string]string // the fake kernel's state
}

func (s *fakeSandbox) ID() string { return s.id }

func (s *fakeSandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.files[p.Path]
	if p.Offset == 0 && !p.Append {
		cur = nil
	}
	if int64(len(cur)) < p.Offset {
		return nil, fmt.Errorf("write past the end: %w", errdefs.ErrInvalidArgument)
	}
	cur = append(cur[:p.Offset:p.Offset], p.Data...)
	s.files[p.Path] = cur
	return &agent.FileInfo{Name: p.Path[strings.LastIndex(p.Path, "/")+1:], Path: p.Path, Type: "file", Size: int64(len(cur))}, nil
}

func (s *fakeSandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[p.Path]
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

func (s *fakeSandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []agent.FileInfo
	for name, b := range s.files {
		if strings.HasPrefix(name, p.Path+"/") {
			out = append(out, agent.FileInfo{Name: name[len(p.Path)+1:], Path: name, Type: "file", Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (s *fakeSandbox) Remove(ctx context.Context, p agent.RemoveParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, p.Path)
	return nil
}

// fakeContexts is a tenant-scoped in-memory manager.
type fakeContexts struct {
	mu      sync.Mutex
	recs    map[string]*contexts.Record
	sbs     map[string]*fakeSandbox // by context id
	events  []api.PathEvent
	n       int
	failAll error
}

var _ Contexts = (*fakeContexts)(nil)

func newFakeContexts() *fakeContexts {
	return &fakeContexts{recs: map[string]*contexts.Record{}, sbs: map[string]*fakeSandbox{}}
}

func (f *fakeContexts) Get(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAll != nil {
		return nil, f.failAll
	}
	r, ok := f.recs[id]
	if !ok || r.TenantID != tenantID {
		return nil, fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound)
	}
	cp := *r
	return &cp, nil
}

func (f *fakeContexts) List(ctx context.Context, flt contexts.Filter) ([]*contexts.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAll != nil {
		return nil, f.failAll
	}
	var out []*contexts.Record
	for _, r := range f.recs {
		if flt.TenantID != "" && r.TenantID != flt.TenantID {
			continue
		}
		if flt.ConversationID != "" && r.ConversationID != flt.ConversationID {
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

func (f *fakeContexts) Terminate(ctx context.Context, tenantID, id string, reason contexts.Reason) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok || r.TenantID != tenantID {
		return fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound)
	}
	r.State, r.Reason = contexts.StateTerminated, reason
	return nil
}

func (f *fakeContexts) active(id contexts.Identity) *contexts.Record {
	for _, r := range f.recs {
		if r.Identity == id && r.State.Active() {
			return r
		}
	}
	return nil
}

func (f *fakeContexts) PathEvent(ctx context.Context, id contexts.Identity, ev api.PathEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
	if ev.Type == api.PathDeleted {
		if r := f.active(id); r != nil {
			r.State, r.Reason = contexts.StateTerminated, contexts.ReasonDeleted
		}
	}
	return nil
}

func (f *fakeContexts) Use(ctx context.Context, id contexts.Identity, fn func(context.Context, *contexts.Record, contexts.Sandbox) error) error {
	f.mu.Lock()
	if f.failAll != nil {
		f.mu.Unlock()
		return f.failAll
	}
	r := f.active(id)
	if r == nil {
		f.n++
		r = &contexts.Record{ID: fmt.Sprintf("ctx-%04d", f.n), Identity: id, State: contexts.StateReady,
			SandboxID: fmt.Sprintf("sb-%04d", f.n), CreatedAt: time.Now()}
		f.recs[r.ID] = r
		f.sbs[r.ID] = &fakeSandbox{id: r.SandboxID, files: map[string][]byte{}, vars: map[string]string{}}
	}
	cp := *r
	sb := f.sbs[r.ID]
	f.mu.Unlock()
	return fn(ctx, &cp, sb)
}

func (f *fakeContexts) Stats() api.SessionMetrics {
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.SessionMetrics{SessionStats: api.SessionStats{TotalCreated: int64(f.n)}}
}

// fakeTools implements run_code the way the registry and manager validate
// it, on a toy kernel: "x=v" sets a variable, "print(x)" prints it, any
// other line is echoed; each line is one streamed stdout chunk.
type fakeTools struct {
	ctxs *fakeContexts
	fail error // returned by Call when set
}

var _ Tools = (*fakeTools)(nil)

func (t *fakeTools) Export(format string) (any, error) {
	switch format {
	case "", "openai", "anthropic", "mcp":
		return []map[string]string{{"name": "run_code", "format": format}}, nil
	}
	return nil, fmt.Errorf("unknown format %q: %w", format, errdefs.ErrInvalidArgument)
}

func (t *fakeTools) Call(ctx context.Context, c ToolCall, out contexts.OutputFunc) (any, error) {
	if t.fail != nil {
		return nil, t.fail
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
	err := t.ctxs.Use(ctx, c.Identity, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		fs := sb.(*fakeSandbox)
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
		res = &api.RunCodeResult{Success: true, Stdout: stdout.String(), SandboxID: rec.SandboxID}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
