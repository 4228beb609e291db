package local

import (
	"context"
	"maps"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci"
)

// Networks builds and removes the networks of sandboxes that ask for one
// (contexts.Spec.Network). network/stack implements it.
type Networks interface {
	// Setup builds sandboxID's network under p for tenant (and the
	// execution context it serves, for the audit trail). It returns what
	// the runtime needs to join it, and variables for the sandbox's
	// environment (the placeholders of the secrets it may use).
	Setup(ctx context.Context, sandboxID, tenant, contextID string, p policy.Policy) (*runtime.Network, map[string]string, error)
	// Teardown removes sandboxID's network once its processes are gone;
	// an id without one is not an error.
	Teardown(ctx context.Context, sandboxID string) error
	// Check reports whether tenant's network cap allows p (nil), or why
	// not: how a build step's network is cut down to the cap.
	Check(tenant string, p policy.Policy) error
}

// networkEnv is the sandbox's environment with its network's: the CA
// variables first (the caller may point them elsewhere), then the secret
// placeholders, which win (the sandbox asked for those secrets by name).
func networkEnv(user map[string]string, n *runtime.Network, netEnv map[string]string) map[string]string {
	env := make(map[string]string, len(user)+len(agent.CAEnv)+len(netEnv))
	if len(n.CACerts) > 0 {
		for _, k := range agent.CAEnv { // the sandbox's system bundle holds its CA (docs/network-egress.md, Trust)
			env[k] = oci.CABundlePath
		}
	}
	maps.Copy(env, user)
	maps.Copy(env, netEnv)
	return env
}
