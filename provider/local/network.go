package local

import (
	"context"
	"maps"

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

// caEnv points the programs that keep a trust store of their own at the
// sandbox's system bundle, which holds its CA (docs/network.md, Trust):
// Node adds NODE_EXTRA_CA_CERTS to its built-in roots, Python's requests
// and pip read REQUESTS_CA_BUNDLE and PIP_CERT, OpenSSL and Go
// SSL_CERT_FILE, curl CURL_CA_BUNDLE.
var caEnv = []string{"NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "PIP_CERT"}

// networkEnv is the sandbox's environment with its network's: the CA
// variables first (the caller may point them elsewhere), then the secret
// placeholders, which win (the sandbox asked for those secrets by name).
func networkEnv(user map[string]string, n *runtime.Network, netEnv map[string]string) map[string]string {
	env := make(map[string]string, len(user)+len(caEnv)+len(netEnv))
	if len(n.CACerts) > 0 {
		for _, k := range caEnv {
			env[k] = oci.CABundlePath
		}
	}
	maps.Copy(env, user)
	maps.Copy(env, netEnv)
	return env
}
