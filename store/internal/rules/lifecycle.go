package rules

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/policy"
)

// The metadata keys under which sandlot kept a context's lifecycle state
// before it had typed fields (schema version 6 moved them into columns).
const (
	legacyPaused        = "sandlot.paused"        // RFC 3339 time
	legacyAutoPause     = "sandlot.autoPause"     // Go duration
	legacyAutoResume    = "sandlot.autoResume"    // Go duration
	legacyFixedExpiry   = "sandlot.fixedExpiry"   // "true"
	legacyMaxExecutions = "sandlot.maxExecutions" // integer
	legacyNetwork       = "sandlot.network"       // policy JSON
	legacyTemplateName  = "sandlot.e2bTemplate"   // E2B templateID
)

// LiftMetadata moves the lifecycle state that meta holds under
// contexts.ReservedPrefix keys (as sandlot wrote it before schema version
// 6) into l, and returns the caller's metadata without any reserved key.
// changed reports whether meta held one. A value that does not parse is
// dropped, as the code that read it then ignored it, except a pause: a
// present key meant paused, so it stays paused (since the epoch).
func LiftMetadata(meta map[string]string, l *contexts.Lifecycle) (rest map[string]string, changed bool) {
	rest = make(map[string]string, len(meta))
	for k, v := range meta {
		if !strings.HasPrefix(k, contexts.ReservedPrefix) {
			rest[k] = v
			continue
		}
		changed = true
		switch k {
		case legacyPaused:
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				t = Time(t)
				l.PausedAt = &t
			} else {
				t := time.Unix(0, 0).UTC()
				l.PausedAt = &t
			}
		case legacyAutoPause:
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				l.AutoPause = d
			}
		case legacyAutoResume:
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				l.AutoResume = d
			}
		case legacyFixedExpiry:
			l.FixedExpiry = v == "true"
		case legacyMaxExecutions:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				l.MaxExecutions = n
			}
		case legacyNetwork:
			var p policy.Policy
			if err := json.Unmarshal([]byte(v), &p); err == nil {
				l.Network = &p
			}
		case legacyTemplateName:
			l.TemplateName = v
		}
	}
	if len(rest) == 0 {
		rest = nil
	}
	return rest, changed
}
