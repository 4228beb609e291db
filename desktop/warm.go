package desktop

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
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

// PoolSpec is the desktop template's warm pool: sandboxes with cfg's
// network (nil: none) and Env whose X server (cfg's screen) and XFCE
// session already run and are drawn. Both ways in take them without
// starting a second desktop: the native manager starts each part only
// when it does not run, and E2B's desktop SDK, which runs `Xvfb :0 ...`
// and `startxfce4` itself, finds the server and the session it asked for
// (see warmShims). The contexts manager also warms a desktop it creates
// anew for a create the pool could have served (PoolSpec.Warm), so such a
// create returns a drawn desktop either way: the SDK's own start then
// finds it running. Of cfg only the screen, the stream-ready wait and the
// network count; zero values as in New.
func PoolSpec(size int, cfg Config) contexts.PoolSpec {
	cfg = withDefaults(cfg)
	undrawn := newUndrawn(cfg.Meter)
	return contexts.PoolSpec{Size: size, Network: cfg.Network, Env: Env,
		Warm:  func(ctx context.Context, sb contexts.Sandbox) error { return warm(ctx, sb, cfg, undrawn) },
		Bytes: warmBytes}
}

// warmBytes is what a warm desktop is taken to hold against the warm
// pools' memory budget when its pool grows with demand: a running one
// measured 140 MiB with its browser, a warm one runs X and XFCE without
// it.
const warmBytes = 128 << 20

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

// warmStack starts X, the XFCE session and the stream's web side (noVNC
// on StreamPort, to x11vnc on vncPort), and holds them for the sandbox's
// life. x11vnc itself is left to whoever takes the desktop: the native
// manager starts it with the session's password; the SDK's
// stream.start() refuses to run when x11vnc runs, starts its own on the
// same port, and waits for StreamPort to listen (its own noVNC then finds
// the port taken, and this one serves).
func warmStack(w, h int) string { return sessionScript(w, h) + "wait" }

// warm starts a desktop sandbox's X server and session and waits until
// they are drawn (readyScript): a create's own warm-up at most the
// stream-ready wait after the window manager (the create waits for it),
// a pool's fill at most poolDrawWait, when that is longer (a create waits
// for it only when it comes during the fill with none ready, and its take
// should find it drawn).
func warm(ctx context.Context, sb contexts.Sandbox, cfg Config, undrawn metric.Int64Counter) error {
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
	go sb.Exec(context.WithoutCancel(ctx), agent.ExecParams{Argv: []string{"/bin/bash", "-c", warmStack(cfg.Width, cfg.Height)}, TimeoutMs: -1, Tag: "desktop"}, nil)
	if err := fontCache(ctx, sb, cfg.Logger); err != nil {
		return err
	}
	r := readiness{wait: cfg.StreamWait, stage: "create"}
	if contexts.PoolFill(ctx) {
		r.wait, r.stage = max(r.wait, poolDrawWait), "pool"
	}
	if err := waitReady(ctx, sb, r, undrawn, cfg.Logger, sb.ID()); err != nil {
		return fmt.Errorf("desktop warm-up: %w", err)
	}
	return nil
}

// fontCache builds the system's font cache in sb while its X server
// starts (XFCE's clients start once it answers). The image has none (its
// /var/cache/fontconfig is empty), so every GTK program of the session
// scanned all the fonts into the user's cache as it started, the window
// manager, the settings daemon, the panel and the desktop at once:
// uncached, one font listing took 1.15 s of a loaded 2-core machine,
// cached 0.1 s, and building the system's cache 0.17 s. It is written as
// root in the sandbox's own layer (the image unchanged). A non-zero exit is
// logged, not fatal: the session then scans as before.
func fontCache(ctx context.Context, sb contexts.Sandbox, log *slog.Logger) error {
	res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"fc-cache", "-s"}, User: agent.RootUser, TimeoutMs: 60_000, Tag: "desktop-warm"}, nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || res.TimedOut {
		log.Warn("desktop warm-up: the system font cache was not built; the session builds its own", logkey.Sandbox, sb.ID(), "exit", res.ExitCode, "detail", strings.TrimSpace(res.Stderr))
	}
	return nil
}
