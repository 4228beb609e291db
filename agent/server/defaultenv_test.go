package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

// TestDefaultEnvKeepsRuntimeEnv: the agent's own runtime settings
// (agent.RuntimeEnv, set by the host) configure the agent alone; what it
// starts gets the sandbox's variables, not them.
func TestDefaultEnvKeepsRuntimeEnv(t *testing.T) {
	for k := range agent.RuntimeEnv {
		t.Setenv(k, "1")
	}
	t.Setenv(agent.EnvPrefix+"FOO", "bar")
	env := defaultEnv("/home/user")
	if !slices.Contains(env, "FOO=bar") {
		t.Errorf("the sandbox's variable is missing: %q", env)
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := agent.RuntimeEnv[k]; ok {
			t.Errorf("the agent's own %s reaches what it starts: %q", k, env)
		}
	}
}
