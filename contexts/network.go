package contexts

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
)

// Networks is what the manager asks of the daemon's sandbox networking
// (network/stack): whether a tenant may have a policy, before anything is
// created, and a change of a running sandbox's policy.
type Networks interface {
	Check(tenant string, p policy.Policy) error
	Update(ctx context.Context, sandboxID, tenant string, p policy.Policy) (*policy.Effective, error)
}

// NetworkClaimer is implemented by Networks whose sandboxes' networks
// can be set up before they have an owner (a warm pool's, PoolSpec): a
// create that takes such a sandbox claims its network for its tenant and
// context.
type NetworkClaimer interface {
	Claim(ctx context.Context, sandboxID, tenant, contextID string, p policy.Policy) error
}

// clonePolicy copies p (nil stays nil), so a record never shares the
// caller's policy value.
func clonePolicy(p *policy.Policy) *policy.Policy {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// checkNetwork validates a policy for tenant before a context is created:
// a malformed one is invalid_argument, one the operator's caps refuse is
// permission_denied. Without Networks the provider decides (the E2B
// provider carries the policy to its cloud; the local one refuses).
func (m *Manager) checkNetwork(tenant string, p *policy.Policy) error {
	if p == nil {
		return nil
	}
	if err := p.Validate(); err != nil {
		return err
	}
	if m.cfg.Networks != nil {
		return m.cfg.Networks.Check(tenant, *p)
	}
	return nil
}

// CheckNetwork reports whether tenant may have p, by the check a create
// asking for it meets (nil: it may). The E2B edge asks it to grant what
// the SDKs request by default up to the operator's cap.
func (m *Manager) CheckNetwork(tenant string, p policy.Policy) error {
	return m.checkNetwork(tenant, &p)
}

// UpdateNetwork replaces the network policy of an active context of
// tenantID (E2B's updateNetwork). The context must have been created
// with a network: a sandbox's namespace is fixed when it starts
// (failed_precondition otherwise).
func (m *Manager) UpdateNetwork(ctx context.Context, tenantID, contextID string, p policy.Policy) (*Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if m.cfg.Networks == nil {
		return nil, fmt.Errorf("sandbox networks are not enabled on this daemon: %w", errdefs.ErrFailedPrecondition)
	}
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	if !rec.State.Active() || rec.SandboxID == "" {
		return nil, fmt.Errorf("context %s is %s: %w", contextID, rec.State, errdefs.ErrFailedPrecondition)
	}
	if err := m.servedElsewhere(ctx, rec); err != nil {
		return nil, err // its node holds the sandbox's network
	}
	if rec.Network == nil {
		return nil, fmt.Errorf("context %s was created without a network of its own, and a network is chosen when a context is created; end it or use another path to get one: %w", contextID, errdefs.ErrFailedPrecondition)
	}
	if _, err := m.cfg.Networks.Update(ctx, rec.SandboxID, tenantID, p); err != nil {
		return nil, err
	}
	rec.Network = clonePolicy(&p)
	m.mu.Lock()
	unsaved := false
	if e := m.byID[contextID]; e != nil {
		e.rec.Network = clonePolicy(&p)
		unsaved = e.unsaved
	}
	m.mu.Unlock()
	if !unsaved {
		// The record read before the network changed is stale by the
		// calls answered meanwhile: the network goes on the stored one.
		m.settleID(ctx, contextID)
		sctx := tctx(ctx, tenantID)
		cur, err := m.store.Get(sctx, contextID)
		if err == nil {
			cur.Network = clonePolicy(&p)
			rec = cur
			err = m.store.Update(sctx, cur)
		}
		if err != nil {
			m.log.Warn("store: update network", logkey.Context, contextID, logkey.Err, err)
		}
	}
	m.changed(tenantID, contextID)
	return rec, nil
}

// ensureNetwork gives the reused context e the network policy p that a
// call asks for (CreateOptions.Network): nothing when p is nil or equal to
// the context's own, else UpdateNetwork, which refuses a context created
// without a network (its namespace is fixed at start). Callers that name a
// network on every call (the /v1 tools, MCP) thus declare the network the
// context should have, as E2B's updateNetwork does.
func (m *Manager) ensureNetwork(ctx context.Context, e *entry, p *policy.Policy) error {
	if p == nil {
		return nil
	}
	m.mu.Lock()
	rec := cloneRecord(e.rec)
	m.mu.Unlock()
	if old := rec.Network; old != nil && samePolicy(*old, *p) {
		return nil
	}
	_, err := m.UpdateNetwork(ctx, rec.TenantID, rec.ID, *p)
	return err
}

// samePolicy compares two policies by their JSON, which is what the
// record keeps.
func samePolicy(a, b policy.Policy) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
