package desktop

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// Env is the environment of every desktop sandbox: what E2B's desktop
// SDK asks for at create (envs.DISPLAY), and so what the native manager
// asks for too, so that both take the same warm desktops.
var Env = map[string]string{"DISPLAY": ":0"}

// DefaultPoolSize is how many started desktops the daemon keeps warm
// (`--pool-sizes desktop=N` overrides it): XFCE's start is most of a
// desktop's create; a running desktop measured 140 MiB with its browser,
// a warm one has none yet.
const DefaultPoolSize = 1

// PoolSpec is the desktop template's warm pool: sandboxes with the
// desktop network (nil: none) and Env, whose X server (w x h) and XFCE
// session are already running. Both ways in take them without starting
// a second desktop: the native manager starts each part only when it
// does not run, and E2B's desktop SDK, which runs `Xvfb :0 ...` and
// `startxfce4` itself, finds the server and the session it asked for
// (see warmShims).
func PoolSpec(size, w, h int, network *policy.Policy) contexts.PoolSpec {
	if w <= 0 || h <= 0 {
		w, h = DefaultWidth, DefaultHeight
	}
	return contexts.PoolSpec{Size: size, Network: network, Env: Env,
		Warm: func(ctx context.Context, sb contexts.Sandbox) error { return warm(ctx, sb, w, h) }}
}

// warmMarker holds the warm desktop's screen (WxHx24) while its
// pre-started X server runs.
const warmMarker = "/tmp/.desktop-warm"

// warmShims go first on PATH (/usr/local/bin) of a warm desktop. The
// SDK's create runs `Xvfb :0 -ac -screen 0 WxHx24 ...` in the background
// and then waits with xdpyinfo; then `startxfce4` and waits for
// xfce4-session, xfwm4 and xfdesktop (@e2b/desktop 2.4.0). Without the
// shims the second Xvfb fails harmlessly, but a second startxfce4 brings
// a second session (its own D-Bus, so a second panel) onto the screen.
// With them: the same screen is taken as it is; another size stops the
// warm desktop and starts the server asked for; startxfce4 does nothing
// while the warm session runs.
var warmShims = map[string]string{
	"/usr/local/bin/Xvfb": `#!/bin/sh
# sandlot's warm desktop runs X on :0 already (` + warmMarker + ` holds its screen).
if [ "$1" = ":0" ] && [ -f ` + warmMarker + ` ]; then
  want=$(printf ' %s ' "$*" | sed -n 's/.* -screen 0 \([0-9x]*\) .*/\1/p')
  [ "$want" = "$(cat ` + warmMarker + `)" ] && exit 0
  # Another screen: stop the warm desktop (its X clients end with it).
  pkill -x Xvfb
  for i in $(seq 100); do xdpyinfo -display :0 >/dev/null 2>&1 || break; sleep 0.05; done
  rm -f ` + warmMarker + `
fi
exec /usr/bin/Xvfb "$@"
`,
	"/usr/local/bin/startxfce4": `#!/bin/sh
# sandlot's warm desktop runs an XFCE session on :0 already.
[ -f ` + warmMarker + ` ] && pgrep -x xfce4-session >/dev/null && exit 0
exec /usr/bin/startxfce4 "$@"
`,
}

// warmStack starts X and XFCE (the same server line as the SDK's) and
// the stream's web side (noVNC on StreamPort, to x11vnc on vncPort), and
// holds them for the sandbox's life. x11vnc itself is left to whoever
// takes the desktop: the native manager starts it with the session's
// password; the SDK's stream.start() refuses to run when x11vnc runs,
// starts its own on the same port, and waits for StreamPort to listen
// (its own noVNC then finds the port taken, and this one serves).
func warmStack(w, h int) string {
	return fmt.Sprintf(`export DISPLAY=:0
echo %[1]dx%[2]dx24 >%[3]s
/usr/bin/Xvfb :0 -ac -screen 0 %[1]dx%[2]dx24 -retro -dpi 96 -nolisten tcp -nolisten unix >/tmp/.desktop-xvfb.log 2>&1 &
for i in $(seq 200); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.02; done
/usr/bin/startxfce4 >/tmp/.desktop-xfce.log 2>&1 &
/opt/noVNC/utils/novnc_proxy --vnc localhost:%[4]d --listen %[5]d --web /opt/noVNC >/tmp/.desktop-novnc.log 2>&1 &
wait`, w, h, warmMarker, vncPort, StreamPort)
}

// warmReady waits (at most 120 s) for what the SDK checks (the session,
// the window manager and the desktop) and for noVNC's page.
var warmReady = fmt.Sprintf(`end=$(( $(date +%%s) + 120 ))
until pgrep -x xfce4-session >/dev/null && pgrep -x xfwm4 >/dev/null && pgrep -x xfdesktop >/dev/null && curl -fsS -m 1 -o /dev/null http://127.0.0.1:%d/vnc.html; do
  [ "$(date +%%s)" -lt "$end" ] || { echo "XFCE did not start in 120 s: $(ps -eo comm= | sort -u | tr '\n' ' ')" >&2; exit 3; }
  sleep 0.05
done`, StreamPort)

// warm starts a pooled desktop sandbox's X server and session.
func warm(ctx context.Context, sb contexts.Sandbox, w, h int) error {
	for path, body := range warmShims {
		res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/sh", "-c", `cat >"$0" && chmod 755 "$0"`, path},
			Stdin: body, User: agent.RootUser, TimeoutMs: 10_000, Tag: "desktop-warm"}, nil)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("desktop warm-up: write %s: %s: %w", path, strings.TrimSpace(res.Stderr), errdefs.ErrUnavailable)
		}
	}
	go sb.Exec(context.WithoutCancel(ctx), agent.ExecParams{Argv: []string{"/bin/bash", "-c", warmStack(w, h)}, TimeoutMs: -1, Tag: "desktop"}, nil)
	res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/bash", "-c", warmReady}, Env: Env, TimeoutMs: 150_000, Tag: "desktop-ready"}, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fmt.Errorf("desktop warm-up (exit %d): %s: %w", res.ExitCode, strings.TrimSpace(res.Stderr), errdefs.ErrUnavailable)
	}
	return nil
}
