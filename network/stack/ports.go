package stack

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
)

// Asleep finds an execution context suspended to disk by its id, for
// the ports route (which then wakes it): its tenant and the network policy
// its sandbox had. ok false: no such context, or it is not suspended or
// has no network.
type Asleep func(ctx context.Context, contextID string) (tenant string, p policy.Policy, ok bool)

// Ports returns the route to sandboxes' ports (network/ports) on domain.
// Its id is a sandbox's or its execution context's (Find); authorize
// checks a token for a sandbox of tenant; wake, when not nil, runs before
// a request goes through (ports.Config.Wake), with the sandbox's tenant;
// asleep, when not nil, finds a context suspended to disk, whose sandbox
// and network are gone, so that an authorized request wakes it (its
// target then says Asleep, with the ingress the operator's caps give its
// policy); guard judges what sandboxes answer (ports.Config.Guard; nil:
// relayed as it is, tests only). The proxy answers the same route to
// sandboxes, and sandboxes created after are told where it is
// (runtime.Network.PortsDomain). Call it before Start.
func (s *Stack) Ports(domain string, authorize func(ctx context.Context, id, tenant, token string) error, wake func(ctx context.Context, id, tenant string) (bool, error), asleep Asleep, guard ports.Guard) (*ports.Handler, error) {
	// owner is who a request's id belongs to: a sandbox's network, else
	// a suspended context.
	owner := func(ctx context.Context, id string) (tenant, contextID string, ok bool) {
		if n, ok := s.Find(id); ok {
			return n.Policy.Tenant, n.Policy.Context, true
		}
		if asleep != nil {
			if t, _, ok := asleep(ctx, id); ok {
				return t, id, true
			}
		}
		return "", "", false
	}
	var wakeFn func(ctx context.Context, id string) (bool, error)
	if wake != nil {
		wakeFn = func(ctx context.Context, id string) (bool, error) {
			tenant, contextID, ok := owner(ctx, id)
			if !ok {
				return false, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
			}
			if contextID == "" {
				return false, nil // a network that serves no execution context cannot be paused
			}
			return wake(ctx, contextID, tenant)
		}
	}
	h, err := ports.New(ports.Config{
		Domain: domain,
		Lookup: func(ctx context.Context, id string) (ports.Target, error) {
			n, ok := s.Find(id)
			if ok {
				return ports.Target{Addr: n.Addr, Ingress: n.Policy.Policy.Ingress, Tenant: n.Policy.Tenant, Context: n.Policy.Context}, nil
			}
			if asleep != nil {
				if tenant, p, ok := asleep(ctx, id); ok {
					// The ingress its sandbox had: the policy under the
					// operator's caps, as Setup applies them.
					if eff, err := s.cfg.Operator.Apply(tenant, p); err == nil {
						return ports.Target{Ingress: eff.Policy.Ingress, Tenant: tenant, Context: id, Asleep: true}, nil
					}
				}
			}
			return ports.Target{}, fmt.Errorf("sandbox %s has no network (create it with one to reach its ports): %w", id, errdefs.ErrNotFound)
		},
		Authorize: func(ctx context.Context, id, token string) error {
			tenant, _, ok := owner(ctx, id)
			if !ok {
				return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
			}
			return authorize(ctx, id, tenant, token)
		},
		Wake:            wakeFn,
		Log:             s.log,
		Reserved:        ports.ReservedE2B,
		ResponseTimeout: s.cfg.PortsTimeout,
		Dial:            s.mgr.DialSandbox,
		Guard:           guard,
	})
	if err != nil {
		return nil, err
	}
	// Sandboxes reach the route too, through the proxy, which answers it
	// in process (docs/network-ports.md, "Ports from inside a sandbox").
	if domain == "" {
		domain = ports.DefaultDomain
	}
	s.domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	s.px.SetPorts(domain, h)
	s.res.SetPorts(domain, s.mgr.Gateway())
	return h, nil
}
