package desktop

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/telemetry"
)

//go:embed drawn.py
var drawnPy string

// minColours is how many colours (in every 7th pixel) a drawn desktop
// shows at least: XFCE's shows about 900 (backdrop, icons, two panels),
// the X server's root before it 1 or 2.
const minColours = 64

// readyScript waits (at most 120 s, by the clock: a loaded machine makes
// every probe slow) for the X server and the window manager, and then at
// most waitMs more for the stream and for the desktop to be drawn
// (drawn.py, given in $DRAWN_PY: XFCE's desktop and panel painted; the
// processes run seconds before their windows show anything). The stream
// is probed in the same loop, from the start: its web side starts first
// and is usually up by the time the window manager is, so the wait costs
// nothing then. A probe of noVNC's page is a request websockify serves in
// a process of its own (a third of a second of CPU on a loaded machine),
// so the page is asked for only once the port listens (/proc/net/tcp*),
// and not at all once an earlier wait saw it answer (phasesFile): then
// the port listening is enough (a warm desktop's take, the native
// manager's wait after a create's warm-up).
// It notes in phasesFile when it first saw each part answer (Timeline),
// and when the desktop was not drawn in time notes "undrawn" and prints
// "not drawn" (the call goes on: the wait is a bound, as for the
// stream). The drawing is waited for once per sandbox: a later wait (the
// native manager's after the warm-up's, the take of a warm desktop, a
// restart of a part) finds "drawn" and does not look, or "undrawn" and
// looks once without waiting (a warm desktop is drawn by the time it is
// taken, though its warm-up's wait ran out).
func readyScript(waitMs int64) string {
	return fmt.Sprintf(`now() { date +%%s%%3N; }
mark() { grep -qs "^$1 " %[3]s || echo "$1 $(now)" >>%[3]s; }
seen=; ! grep -qs '^stream ' %[3]s || seen=1
stream() { grep -qs ':%04[4]X [0-9A-F]*:0000 0A ' /proc/net/tcp /proc/net/tcp6 && { [ -n "$seen" ] || curl -fsS -m 1 -o /dev/null http://127.0.0.1:%[2]d/vnc.html 2>/dev/null; }; }
start=$(now); end=$(( start + 120000 )); x=; wm=; st=; xat=; again=
until [ -n "$x" ] && [ -n "$wm" ]; do
  [ -n "$x" ] || ! xdpyinfo >/dev/null 2>&1 || { x=1; mark x; }
  [ -n "$wm" ] || ! pgrep -x xfwm4 >/dev/null || { wm=1; mark wm; }
  [ -n "$st" ] || ! stream || { st=1; mark stream; }
  [ -n "$x" ] && [ -n "$wm" ] && break
  # No window manager 15 s after X first answered (seen on a loaded host
  # and once on a quiet one: the session gone, the X server under it gone,
  # or the session up without xfwm4): start what is missing, once.
  if [ -n "$x" ] && [ -z "$again" ]; then
    [ -n "$xat" ] || xat=$(now)
    if [ $(( $(now) - xat )) -gt 15000 ]; then
      again=1
      export DISPLAY=:0 NO_AT_BRIDGE=1
      if ! xdpyinfo >/dev/null 2>&1; then
        echo "the X server had ended; starting it again" >&2
        screen=$(cat `+warmMarker+` 2>/dev/null); [ -n "$screen" ] || screen=`+fmt.Sprintf("%dx%dx24", DefaultWidth, DefaultHeight)+`
        setsid -f /usr/bin/Xvfb :0 -ac -screen 0 "$screen" -retro -dpi 96 -nolisten tcp -nolisten unix >>/tmp/.desktop-xvfb.log 2>&1 </dev/null
        for i in $(seq 500); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.02; done
      fi
      if ! pgrep -x xfce4-session >/dev/null; then
        echo "the XFCE session had ended; starting it again" >&2
        `+xfceStart+`
      else
        echo "the XFCE session runs without its window manager; starting xfwm4" >&2
        setsid xfwm4 --replace >>/tmp/.desktop-xfwm4.log 2>&1 </dev/null &
      fi
    fi
  fi
  [ "$(now)" -lt "$end" ] || { echo "the X server or the window manager did not start in 120 s; running: $(ps -eo comm= | sort -u | tr '\n' ' '); the session's log ends: $(tail -c 600 /tmp/.desktop-xfce.log 2>/dev/null | tr '\n' ' '); the X server's: $(tail -c 300 /tmp/.desktop-xvfb.log 2>/dev/null | tr '\n' ' ')" >&2; exit 3; }
  sleep 0.05
done
end=$(( $(now) + %[1]d )); drawn=
if ! grep -qs '^drawn ' %[3]s; then
  dend=$end; ! grep -qs '^undrawn ' %[3]s || dend=0
  python3 -c "$DRAWN_PY" "$dend" %[5]d & drawn=$!
fi
while [ -z "$st" ] && [ "$(now)" -lt "$end" ]; do stream && { st=1; mark stream; }; sleep 0.05; done
[ -z "$drawn" ] || if wait $drawn; then mark drawn; else mark undrawn; echo "not drawn"; fi
exit 0`, waitMs, StreamPort, phasesFile, StreamPort, minColours)
}

// readyEnv is readyScript's environment.
var readyEnv = map[string]string{"DISPLAY": ":0", "DRAWN_PY": drawnPy}

// readiness is how long waitReady waits for a desktop's stream and
// drawing once its window manager answers.
type readiness struct {
	wait time.Duration // at most this
	// stage says whose wait it is, in logs and the undrawn counter:
	// "pool" (a pool's fill), "create" (a create's own
	// warm-up) or "open" (the native manager opening a session).
	stage string
}

// poolDrawWait is how long a pool's fill waits, after the window manager,
// for the desktop to be drawn (when the stream-ready wait is shorter). A
// create waits for a pool's fill only when it comes during the fill with
// none ready (then at most the pool's wait bound), so the fill can wait for
// the drawing instead of offering a desktop still drawing, whose take
// would look again (a python process, 1-2 s of a loaded machine) beside
// XFCE's painting. The drawing's time grows with the machine and its
// load: on the 2-core machine at load 6-8 it came 6.6-8.9 s after the
// window manager, and under a full test run 9.5 s after it, where a bound
// scaled from the warm-up's own wait for the window manager (4 times,
// about 4 s there: the font cache had taken the start's time) ran out.
// The bound only matters for a desktop that does not draw at all.
const poolDrawWait = 60 * time.Second

// waitReady runs readyScript in sb: it returns once the X server and the
// window manager answer and the desktop is drawn and its stream answers,
// or once r's wait after the window manager ran out for either (logged,
// and counted by undrawn with r's stage).
func waitReady(ctx context.Context, sb contexts.Sandbox, r readiness, undrawn metric.Int64Counter, log *slog.Logger, contextID string) error {
	res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/bash", "-c", readyScript(r.wait.Milliseconds())},
		Env: readyEnv, TimeoutMs: 150_000 + r.wait.Milliseconds(), Tag: "desktop-ready"}, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fmt.Errorf("desktop did not start (exit %d%s): %s: %w", res.ExitCode, res.Signal, strings.TrimSpace(res.Stderr), errdefs.ErrUnavailable)
	}
	if strings.Contains(res.Stdout, "not drawn") {
		undrawn.Add(ctx, 1, metric.WithAttributes(attribute.String("stage", r.stage)))
		level := slog.LevelInfo
		if r.stage == "pool" {
			// Offered undrawn: its take looks again, beside the painting.
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "desktop: not drawn within the readiness wait; going on", logkey.Context, contextID, "stage", r.stage, "wait", r.wait)
	}
	if s := strings.TrimSpace(res.Stderr); s != "" {
		// readyScript started a part that had ended (or never came up).
		log.Warn("desktop: started a part again while waiting for it", logkey.Context, contextID, "detail", s)
	}
	return nil
}

// newUndrawn is the counter of readiness waits that ran out before the
// desktop was drawn, by stage.
func newUndrawn(m metric.Meter) metric.Int64Counter {
	return telemetry.Counter(m, "sandlot.desktop.undrawn", "Desktop readiness waits that ran out before the desktop was drawn, by stage (pool, create, open).")
}
