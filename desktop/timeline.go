package desktop

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// Phase is a moment of a desktop's start: a part answering ("x", "wm",
// "stream", first seen by the readiness wait), the desktop drawn
// ("drawn"; "undrawn" when the wait for it ran out) or a process starting
// ("start:<name>", read from /proc afterwards; "start:sandbox" is the
// sandbox's first process), or a moment of the call that opened the
// session, seen by the host ("host:sandbox": the contexts manager handed
// over the sandbox, taken warm or created and warmed; "host:ready": the
// desktop answered; "host:answered": the call's own work done).
type Phase struct {
	Name string
	At   time.Time
}

// phasesFile is where the readiness wait notes when it first saw each
// part answer ("name unix-ms" lines): the start's timeline costs no probe
// beyond the ones the wait runs anyway.
const phasesFile = "/tmp/.desktop-phases"

// timelineProcs are the processes whose start the timeline reports.
var timelineProcs = []string{"Xvfb", "dbus-daemon", "xfce4-session", "xfwm4", "xfsettingsd", "xfce4-panel",
	"Thunar", "xfdesktop", "x11vnc", "websockify", "chromium"}

// timelineScript prints the readiness wait's notes, then "start:<comm>
// unix-ms" for the first process of each name and for PID 1. A process's
// start is in clock ticks since boot (/proc/PID/stat field 22); it is
// turned into wall time against /proc/uptime read at the same moment
// (both 10 ms precise; the sandbox shares the host's clock).
var timelineScript = fmt.Sprintf(`cat %s 2>/dev/null
read up _ </proc/uptime; now=$(date +%%s%%3N); hz=$(getconf CLK_TCK)
for p in /proc/[0-9]*/stat; do cat "$p" 2>/dev/null; echo; done | awk -v now="$now" -v up="$up" -v hz="$hz" -v want=" %s " '
NF == 0 { next }
{ pid = $1; c = $0; sub(/^[0-9]+ \(/, "", c); sub(/\) [A-Za-z] .*$/, "", c)
  r = $0; sub(/^.*\) /, "", r); split(r, f, " ")
  ms = int(now - (up * 1000 - f[20] * 1000 / hz))
  if (pid == 1) c = "sandbox"
  else if (index(want, " " c " ") == 0) next
  if (!(c in at) || ms < at[c]) at[c] = ms }
END { for (c in at) printf "start:%%s %%.0f\n", c, at[c] }'`, phasesFile, strings.Join(timelineProcs, " "))

// parseTimeline reads "name unix-ms" lines, earliest first; a name seen
// twice keeps its first time.
func parseTimeline(out string) []Phase {
	seen := map[string]bool{}
	var ps []Phase
	for _, line := range strings.Split(out, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		ms, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || name == "" || seen[name] {
			continue
		}
		seen[name] = true
		ps = append(ps, Phase{Name: name, At: time.UnixMilli(ms)})
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].At.Before(ps[j].At) })
	return ps
}

// Timeline opens (or reuses) the session of id and says when each part
// of its desktop started and first answered: what a desktop's start
// spends its time on (`sandlot bench` reports it per phase).
func (m *Manager) Timeline(ctx context.Context, id contexts.Identity) ([]Phase, error) {
	var ps []Phase
	err := m.use(ctx, id, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/bash", "-c", timelineScript}, TimeoutMs: 30_000, Tag: "desktop-timeline"}, nil)
		if err != nil {
			return err
		}
		ps = parseTimeline(res.Stdout)
		m.mu.Lock()
		if s := m.sessions[rec.ID]; s != nil {
			ps = append(ps, s.opened...)
		}
		m.mu.Unlock()
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].At.Before(ps[j].At) })
		return nil
	})
	return ps, err
}
