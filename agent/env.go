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

// SandboxEnv returns env with every name prefixed by EnvPrefix, ready for
// the agent's process environment. A name that is empty or holds '=' or NUL
// is an error.
func SandboxEnv(env map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("invalid environment variable %q", k)
		}
		out[EnvPrefix+k] = v
	}
	return out, nil
}
