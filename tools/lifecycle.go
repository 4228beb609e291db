package tools

import (
	"fmt"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// A model that does not know its sandbox is ephemeral keeps variables and
// files it will not find again. The code tools' descriptions and the MCP
// instructions therefore say what survives between calls and what ends it,
// with the values this daemon runs with (Config.TTL, MaxExecutions).

// statefulTools are the tools whose descriptions carry the lifecycle
// sentence, with what survives between their calls.
var statefulTools = map[string]string{
	"run_code":     "variables, imports, files and the packages you install",
	"run_analysis": "variables, files and the packages you install",
	"bash":         "files and the packages you install",
}

// Lifecycle is one paragraph for a model on how long a sandbox's state
// lasts (the MCP server's instructions carry it).
func (r *Registry) Lifecycle() string {
	return r.lifecycle("variables, files and the packages you install")
}

// lifecycle says that keeps survive between calls on one conversation
// path, and what ends them.
func (r *Registry) lifecycle(keeps string) string {
	ttl := r.cfg.Create.TTL
	if ttl <= 0 {
		ttl = r.cfg.TTL
	}
	if ttl <= 0 {
		ttl = contexts.DefaultTTL
	}
	ends := "after " + words(ttl) + " without a call"
	n := r.cfg.MaxExecutions
	if n == 0 {
		n = contexts.DefaultMaxExecutions
	}
	if n > 0 {
		ends += fmt.Sprintf(", after %d code executions (the last one's result says rotated)", n)
	}
	return fmt.Sprintf("The sandbox is ephemeral: %s persist between calls on the same conversation path until "+
		"the sandbox ends: %s, or when it is lost (a result then says stateLost). The next call then starts in a "+
		"fresh sandbox without them, and so does the first call on a new branch of the conversation.", keeps, ends)
}

// words says d for a model: "30 minutes", "1 hour", "90 seconds".
func words(d time.Duration) string {
	unit := func(n int64, name string) string {
		if n == 1 {
			return "1 " + name
		}
		return fmt.Sprintf("%d %ss", n, name)
	}
	switch {
	case d%time.Hour == 0:
		return unit(int64(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return unit(int64(d/time.Minute), "minute")
	case d >= time.Second:
		return unit(int64(d/time.Second), "second")
	}
	return d.String()
}
