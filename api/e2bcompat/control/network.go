package control

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// networkUpdater is the Manager's UpdateNetwork; a Manager without it
// answers updateNetwork with failed_precondition.
type networkUpdater interface {
	UpdateNetwork(ctx context.Context, tenantID, contextID string, p policy.Policy) (*contexts.Record, error)
}

// updateNetworkBody is the body of PUT /sandboxes/{id}/network.
type updateNetworkBody struct {
	policy.E2BNetwork
	AllowInternetAccess *bool `json:"allow_internet_access"`
}

// createNetwork maps a create request's allow_internet_access and network
// to a policy. Neither: nil, a sandbox with loopback only (no ports, no
// egress), which differs from E2B, whose default is open
// (docs/network.md).
func createNetwork(allow *bool, n *policy.E2BNetwork) (*policy.Policy, error) {
	if allow == nil && n == nil {
		return nil, nil
	}
	p, err := policy.FromE2B(allow, n)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// networkDetail fills getInfo's allowInternetAccess and network from the
// record's policy.
func networkDetail(d *detailBody, rec *contexts.Record) {
	p := rec.Network
	if p == nil {
		return
	}
	allow, n := policy.ToE2B(*p)
	d.AllowInternetAccess = allow
	d.Network = &n
}

// updateNetwork replaces a sandbox's egress (allowOut, denyOut, rules,
// allow_internet_access) and keeps its ingress (allowPublicTraffic,
// maskRequestHost), as E2B's PUT /sandboxes/{id}/network does.
func (h *Handler) updateNetwork(w http.ResponseWriter, r *http.Request, tenantID string) {
	nu, ok := h.edge.Manager().(networkUpdater)
	if !ok {
		core.WriteAPIError(w, fmt.Errorf("sandbox networks are not enabled on this daemon: %w", errdefs.ErrFailedPrecondition))
		return
	}
	var body updateNetworkBody
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	rec, err := h.edge.Active(r.Context(), tenantID, r.PathValue("id"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	body.AllowPublicTraffic, body.MaskRequestHost = nil, nil
	p, err := policy.FromE2B(body.AllowInternetAccess, &body.E2BNetwork)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if old := rec.Network; old != nil {
		p.Ingress = old.Ingress
		p.Secrets = old.Secrets
	}
	if _, err := nu.UpdateNetwork(r.Context(), tenantID, rec.ID, p); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// noEgress reports whether p asks for nothing but no egress: mode none,
// no header rules, no secrets.
func noEgress(p *policy.Policy) bool {
	return p != nil && p.Mode.Normalize() == policy.None && len(p.Headers) == 0 && len(p.Secrets) == 0
}
