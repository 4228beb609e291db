package control

import (
	"context"
	"errors"
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

// networkChecker is the Manager's CheckNetwork: the operator's cap, asked
// before a create to grant what E2B's SDKs request by default.
type networkChecker interface {
	CheckNetwork(tenant string, p policy.Policy) error
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

// grantDefaults narrows what a create asks for only because it is E2B's
// default to what the operator's cap allows the tenant; the cap stays the
// one authority, so the result is never more than the cap (docs/e2b.md,
// "The network an E2B create gets"):
//
//   - allow_internet_access true without denyOut (the Python SDK and the
//     JS SDK before 2.51 send it on every create) asks for the open
//     internet: mode open when the cap allows it, else what the request
//     asks without the flag (an allowlist of allowOut, none when empty);
//   - allowPublicTraffic absent, on a daemon that serves ports, asks for
//     public ports, E2B's default: public when the cap allows them, else
//     private (the traffic token is needed).
//
// What a request names explicitly and the cap refuses (denyOut without
// ALL_TRAFFIC, rules beyond the cap, allowPublicTraffic true where ports
// may not be public) is left as asked: the manager's check answers 403.
func (h *Handler) grantDefaults(tenantID string, body createBody, p *policy.Policy) (*policy.Policy, error) {
	if p == nil {
		return nil, nil
	}
	n := body.Network
	if n == nil {
		n = &policy.E2BNetwork{}
	}
	allowed := func(q policy.Policy) (bool, error) {
		c, ok := h.edge.Manager().(networkChecker)
		if !ok {
			return false, nil // no cap to ask: grant nothing by default
		}
		err := c.CheckNetwork(tenantID, q)
		if errors.Is(err, errdefs.ErrPermissionDenied) {
			return false, nil
		}
		return err == nil, err
	}
	g := p.Clone()
	if body.AllowInternetAccess != nil && *body.AllowInternetAccess && len(n.DenyOut) == 0 {
		open := g.Clone()
		open.Ingress = policy.Ingress{}
		ok, err := allowed(open)
		if err != nil {
			return nil, err
		}
		if !ok {
			// E2B's own reading of allowOut alone is "nothing denied";
			// without open, sandlot's: an allowlist of allowOut.
			without, err := policy.FromE2B(nil, &policy.E2BNetwork{AllowOut: n.AllowOut, Rules: n.Rules})
			if err != nil {
				return nil, err
			}
			g.Mode, g.Allow, g.Deny = without.Mode, without.Allow, without.Deny
		}
	}
	if h.edge.Domain() != nil && n.AllowPublicTraffic == nil {
		ok, err := allowed(policy.Policy{Ingress: policy.Ingress{Public: true}})
		if err != nil {
			return nil, err
		}
		g.Ingress.Public = ok
	}
	return &g, nil
}

// networkDetail fills getInfo's allowInternetAccess and network from the
// record's policy. A sandbox without a network of its own has no egress
// and no ports: allowInternetAccess false, no network object.
func networkDetail(d *detailBody, rec *contexts.Record) {
	p := rec.Network
	if p == nil {
		f := false
		d.AllowInternetAccess = &f
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
