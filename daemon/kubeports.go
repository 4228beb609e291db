package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
)

// serving reports whether the pods' egress proxy runs (a key and an
// address were configured).
func (k *kubeEgress) serving() bool { return k != nil && k.ln != nil }

// servesPorts reports whether the front door serves the ports route to
// sandbox pods (the kubernetes provider was built).
func (k *kubeEgress) servesPorts() bool { return k != nil && k.prov != nil }

// portsRoute is the ports route to sandbox pods (docs/kubernetes-provider.md,
// "Ports"): the front door of any replica forwards to the pod's address
// and port over the pod network, which the pods' NetworkPolicy admits from
// sandlot's pods only. The pod is the one the cluster says the sandbox
// was enrolled in; its tenant, context and ingress are its record's.
func (k *kubeEgress) portsRoute(domain string, timeout time.Duration, guard ports.Guard, log *slog.Logger) (*ports.Handler, error) {
	return ports.New(ports.Config{
		Domain: domain,
		Lookup: k.target,
		Authorize: func(ctx context.Context, id, token string) error {
			t, err := k.target(ctx, id)
			if err != nil {
				return err
			}
			return authorizeTraffic(ctx, k.verify, id, t.Tenant, token, k.st)
		},
		Log:             log,
		Reserved:        ports.ReservedE2B,
		ResponseTimeout: timeout,
		Guard:           guard,
	})
}

// target finds a sandbox by its context's id (the E2B sandboxID) or its
// own, through the record and the cluster, which must agree.
func (k *kubeEgress) target(ctx context.Context, id string) (ports.Target, error) {
	notFound := fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	var rec *contexts.Record
	if strings.HasPrefix(id, "k8s-") {
		peer, err := k.prov.EgressPeer(ctx, id)
		if err != nil {
			return ports.Target{}, err
		}
		if rec, err = k.st.Get(ctx, peer.Context); err != nil {
			return ports.Target{}, notFound
		}
	} else {
		r, err := k.st.Get(ctx, id)
		if err != nil {
			return ports.Target{}, notFound
		}
		rec = r
	}
	if rec.State != contexts.StateReady || rec.SandboxID == "" || (strings.HasPrefix(id, "k8s-") && rec.SandboxID != id) {
		return ports.Target{}, notFound
	}
	peer, err := k.prov.EgressPeer(ctx, rec.SandboxID)
	if err != nil {
		return ports.Target{}, err
	}
	if peer.Tenant != rec.TenantID || peer.Context != rec.ID {
		return ports.Target{}, notFound
	}
	var in policy.Ingress
	if rec.Network != nil {
		in = rec.Network.Ingress
	}
	return ports.Target{Addr: peer.Addrs[0], Ingress: in, Tenant: rec.TenantID, Context: rec.ID}, nil
}
