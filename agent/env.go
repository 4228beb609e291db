package agent

import (
	"fmt"
	"strings"
)

// EnvPrefix marks, in the agent's own environment, the sandbox's environment
// (contexts.Spec.Env): the host passes FOO=bar as SANDLOT_ENV_FOO=bar, and
// the agent makes FOO=bar part of the base environment of every exec and
// kernel. The prefix keeps user variables (GODEBUG, GOMAXPROCS, ...) from
// configuring the agent itself.
const EnvPrefix = "SANDLOT_ENV_"

// CAEnv are the variables that point programs keeping a trust store of
// their own at a CA bundle: Node adds NODE_EXTRA_CA_CERTS to its built-in
// roots, Python's requests and pip read REQUESTS_CA_BUNDLE and PIP_CERT,
// OpenSSL and Go SSL_CERT_FILE, curl CURL_CA_BUNDLE. The host sets them for
// a local sandbox's network (provider/local), the agent for the CA an
// enrollment brings (a pod's).
var CAEnv = []string{"NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "PIP_CERT"}

// RuntimeEnv is the agent's own Go runtime setting, in its process
// environment beside the sandbox's variables: one P from the start. The
// agent wants one (cmd/sandlot-agent) and used to set it in main, where
// the runtime had already started with one P per CPU the cgroup allows:
// shrinking then hands the dropped P's cached spans back to the heap's
// central lists, about 80 of the agent's ~640 page faults at boot on the
// dev machine, every create. The agent never passes it on (only
// EnvPrefix'ed variables reach what it starts).
var RuntimeEnv = map[string]string{"GOMAXPROCS": "1"}

// SandboxEnv returns env with every name prefixed by EnvPrefix, plus
// RuntimeEnv, ready for the agent's process environment. A name that is
// empty or holds '=' or NUL is an error.
func SandboxEnv(env map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(env)+len(RuntimeEnv))
	for k, v := range RuntimeEnv {
		out[k] = v
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("invalid environment variable %q", k)
		}
		out[EnvPrefix+k] = v
	}
	return out, nil
}
