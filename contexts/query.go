package contexts

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// TemplateStats are the counters of one template (or the totals).
type TemplateStats struct {
	Active              int64 `json:"active"`
	TotalCreated        int64 `json:"totalCreated"`
	TotalReused         int64 `json:"totalReused"`
	TotalCleaned        int64 `json:"totalCleaned"`    // contexts this manager ended for being idle (expired)
	TotalTerminated     int64 `json:"totalTerminated"` // contexts this manager ended, any reason
	HealthCheckFailures int64 `json:"healthCheckFailures"`
	PoolSize            int64 `json:"poolSize"` // warm sandboxes ready now (every tenant's: Stats only)
	PoolHits            int64 `json:"poolHits"`
	PoolMisses          int64 `json:"poolMisses"`
}

// Stats are the manager's counters: totals and per template.
type Stats struct {
	Active, TotalCreated, TotalReused, TotalCleaned, TotalTerminated, HealthCheckFailures int64
	PoolSize, PoolHits, PoolMisses                                                        int64
	PerTemplate                                                                           map[string]TemplateStats
}

// statsKey names the counters of one tenant's contexts of one template.
type statsKey struct{ tenant, template string }

// ts returns the counters of tenantID's contexts of template.
// Precondition: mu held.
func (m *Manager) ts(tenantID, template string) *TemplateStats {
	k := statsKey{tenantID, template}
	s := m.tstats[k]
	if s == nil {
		s = &TemplateStats{}
		m.tstats[k] = s
	}
	return s
}

func (m *Manager) count(tenantID, template string, f func(*TemplateStats)) {
	m.mu.Lock()
	f(m.ts(tenantID, template))
	m.mu.Unlock()
}

// Get returns a context of tenantID by id (any state). A record of another
// tenant is ErrNotFound.
func (m *Manager) Get(ctx context.Context, tenantID, contextID string) (*Record, error) {
	m.settleID(ctx, contextID) // the calls answered so far are in it
	rec, err := m.store.Get(tctx(ctx, tenantID), contextID)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("store: get context; using the in-memory copy", logkey.Context, contextID, logkey.Err, err)
	}
	if err != nil {
		m.mu.Lock()
		e := m.byID[contextID]
		if e != nil {
			rec = cloneRecord(e.rec)
		}
		m.mu.Unlock()
		if rec == nil {
			return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
		}
	}
	if rec.TenantID != tenantID {
		return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
	}
	return rec, nil
}

// Served is Get answered from this manager's copy of the context when
// this manager alone serves it (a provider whose sandboxes one node
// serves) and holds it live: that copy counts every call answered here,
// and the store's differs from it only by the writes on their way. A call
// on the context's sandbox reads it so (the E2B API's every call), saving
// a store read per call. An end another process wrote is seen at this
// manager's next write for the context, which drops it, and not at once.
// Otherwise, and for a context this manager does not hold, Get.
func (m *Manager) Served(ctx context.Context, tenantID, contextID string) (*Record, error) {
	if !m.shared {
		m.mu.Lock()
		var rec *Record
		if e := m.byID[contextID]; e != nil && !e.ended && !e.unsaved && e.rec.TenantID == tenantID && e.rec.State.Active() {
			rec = cloneRecord(e.rec)
		}
		m.mu.Unlock()
		if rec != nil {
			return rec, nil
		}
	}
	return m.Get(ctx, tenantID, contextID)
}

// Usage samples the resource usage of a context this manager serves, live
// from its provider (Provider.Usage, by sandbox id, attached or not); a
// context it does not serve, or a provider that cannot sample, gives the
// record's last sample.
func (m *Manager) Usage(ctx context.Context, tenantID, contextID string) (ResourceUsage, error) {
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return ResourceUsage{}, err
	}
	m.mu.Lock()
	e := m.byID[contextID]
	served := e != nil && !e.ended
	m.mu.Unlock()
	// runsc samples disk usage from inside, which a frozen sandbox cannot answer.
	if !m.provider.Capabilities().Has(CapUsage) || !served || !rec.State.Active() || rec.Paused() || rec.SandboxID == "" {
		return rec.ResourceUsage, nil
	}
	u, err := m.provider.Usage(ctx, rec.SandboxID)
	if err != nil {
		m.log.Debug("sample usage", logkey.Sandbox, rec.SandboxID, logkey.Err, err)
		return rec.ResourceUsage, nil
	}
	return u, nil
}

// Lookup returns the active record of id without creating one.
func (m *Manager) Lookup(ctx context.Context, id Identity) (*Record, error) {
	id, err := normalize(id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	e := m.byIdent[id]
	m.mu.Unlock()
	m.settle(ctx, e)
	rec, err := m.store.GetActive(tctx(ctx, id.TenantID), id)
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("store: look up context; using the in-memory copy", logkey.Tenant, id.TenantID, logkey.Err, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.byIdent[id]; e != nil && (e.unsaved || !errors.Is(err, errdefs.ErrNotFound)) {
		return cloneRecord(e.rec), nil
	}
	return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
}

// List returns records matching f. With f.TenantID set the store call is
// scoped to that tenant; an empty TenantID lists every tenant (admin).
func (m *Manager) List(ctx context.Context, f Filter) ([]*Record, error) {
	sctx := ctx
	if f.TenantID != "" {
		sctx = tctx(ctx, f.TenantID)
	}
	m.settleAll(ctx)
	recs, err := m.store.List(sctx, f)
	if err != nil {
		return nil, fmt.Errorf("list contexts: %w", err)
	}
	return recs, nil
}

// Stats returns the manager's counters over every tenant. Active counts
// the contexts this manager serves (including reconciled ones not yet
// attached); PoolSize the warm sandboxes ready now.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.statsLocked(func(string) bool { return true })
	for _, p := range m.pools {
		s := st.PerTemplate[p.key.template]
		s.PoolSize += int64(len(p.ready))
		st.PerTemplate[p.key.template] = s
		st.PoolSize += int64(len(p.ready))
	}
	return st
}

// TenantStats returns the counters of tenantID's contexts alone: what it
// created, reused, ended and found unhealthy, its active contexts and its
// creates' pool hits and misses. The warm pool holds no tenant's
// sandboxes: PoolSize is zero.
func (m *Manager) TenantStats(tenantID string) Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statsLocked(func(t string) bool { return t == tenantID })
}

// statsLocked sums the counters of the tenants mine accepts, per
// template, with their active contexts. Precondition: mu held.
func (m *Manager) statsLocked(mine func(tenantID string) bool) Stats {
	per := map[string]TemplateStats{}
	for k, v := range m.tstats {
		if !mine(k.tenant) {
			continue
		}
		s := per[k.template]
		s.TotalCreated += v.TotalCreated
		s.TotalReused += v.TotalReused
		s.TotalCleaned += v.TotalCleaned
		s.TotalTerminated += v.TotalTerminated
		s.HealthCheckFailures += v.HealthCheckFailures
		s.PoolHits += v.PoolHits
		s.PoolMisses += v.PoolMisses
		per[k.template] = s
	}
	for _, e := range m.byID {
		if !mine(e.rec.TenantID) {
			continue
		}
		s := per[e.rec.Template]
		s.Active++
		per[e.rec.Template] = s
	}
	var st Stats
	for _, s := range per {
		st.Active += s.Active
		st.TotalCreated += s.TotalCreated
		st.TotalReused += s.TotalReused
		st.TotalCleaned += s.TotalCleaned
		st.TotalTerminated += s.TotalTerminated
		st.HealthCheckFailures += s.HealthCheckFailures
		st.PoolHits += s.PoolHits
		st.PoolMisses += s.PoolMisses
	}
	st.PerTemplate = per
	return st
}

// Limits are the active contexts a tenant and one user's conversation may
// have (Config.MaxPerTenant and MaxPerConversation with their defaults);
// zero or less is no limit.
func (m *Manager) Limits() (perTenant, perConversation int) {
	return m.cfg.MaxPerTenant, m.cfg.MaxPerConversation
}
