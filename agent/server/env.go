package server

import (
	"maps"
	"regexp"
	"strings"
	"sync"

	"github.com/sandlot/sandlot/errdefs"
)

// envName is a variable name env.set accepts: one every kernel's run
// environment accepts too, since kernels already running get the
// variables with each run.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxAddedEnv bounds the variables env.set may add in all.
const maxAddedEnv = 256

// addedEnv is what env.set added to the base environment.
type addedEnv struct {
	mu   sync.RWMutex
	vars map[string]string
}

// setEnv adds env to the base environment of later execs and kernels, and
// hands it to the kernels for the runs of those already running
// (agent.SetEnvParams).
func (s *Server) setEnv(env map[string]string) error {
	for k, v := range env {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			return errf(errdefs.CodeInvalidArgument, "env.set: bad environment variable %q", k)
		}
	}
	s.added.mu.Lock()
	added := maps.Clone(s.added.vars)
	if added == nil {
		added = map[string]string{}
	}
	maps.Copy(added, env)
	if len(added) > maxAddedEnv {
		s.added.mu.Unlock()
		return errf(errdefs.CodeInvalidArgument, "env.set: more than %d variables", maxAddedEnv)
	}
	s.added.vars = added
	s.added.mu.Unlock()
	// After the base environment: a kernel starting now either reads the
	// new base or started before the kernels heard of it.
	s.kernels.SetEnv(added)
	return nil
}

// baseEnv is the environment every exec and kernel starts from: the
// configured one and what env.set added.
func (s *Server) baseEnv() []string {
	s.added.mu.RLock()
	defer s.added.mu.RUnlock()
	return mergeEnv(s.cfg.Env, s.added.vars)
}
