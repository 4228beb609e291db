package desktop

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"image/png"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/telemetry"
)

// Defaults of Config.
const (
	// DefaultTTL is how long a desktop session lives without a call
	// (the session-reuse spec's desktop timeout).
	DefaultTTL = 15 * time.Minute
	// DefaultStreamWait is how long opening a session waits for the live
	// view's stream to answer.
	DefaultStreamWait = 3000 * time.Millisecond
	DefaultWidth      = 1024
	DefaultHeight     = 768
)

// Ports inside a desktop sandbox.
const (
	StreamPort   = 6080 // noVNC (websockify): the live view
	vncPort      = 5900 // x11vnc, loopback only
	DevToolsPort = 9222 // Chromium's DevTools endpoint, loopback only
)

// PathPrefix marks a desktop session's path id: a conversation's desktop
// session lives beside its execution sessions, never in their sandbox.
const PathPrefix = "desktop:"

// Contexts is what the manager needs of the execution contexts' manager
// (contexts.Manager implements it): desktop sessions are contexts of the
// desktop template.
type Contexts interface {
	Use(ctx context.Context, id contexts.Identity, opts contexts.CreateOptions, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error
	SetTTL(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error)
	// HealthCheckFailed counts a session whose health check found a part
	// stopped (the session metrics' health_check_failures).
	HealthCheckFailed(rec *contexts.Record)
}

// Config configures a Manager. Zero values are documented per field.
type Config struct {
	Contexts Contexts // required
	// TTL: a session ends this long after its last call. 0: DefaultTTL.
	TTL time.Duration
	// StreamWait bounds how long opening a session waits for the stream.
	// 0: DefaultStreamWait.
	StreamWait time.Duration
	// Width and Height of the screen; 0: 1024x768.
	Width, Height int
	// Network is a session's network: nil gives none, and so no live view
	// (the stream is reached through the sandbox's ports).
	Network *policy.Policy
	// LiveURL is the base URL of a sandbox's port (the ports route:
	// https://<port>-<id>.<domain>); nil: no live view.
	LiveURL func(contextID string, port int) string
	Logger  *slog.Logger
	// Meter makes the desktop's counters; nil: telemetry.Meter().
	Meter metric.Meter
}

// Manager runs desktop sessions: one per (tenant, conversation, path),
// each a sandbox of the desktop template whose X server, window manager,
// browser and stream it starts, checks and drives. Safe for concurrent use.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	undrawn metric.Int64Counter

	mu       sync.Mutex
	sessions map[string]*session // by context id
}

// session is what the manager keeps of a running desktop.
type session struct {
	password string    // the live view's VNC password
	healthy  time.Time // when its desktop last answered a health check; under Manager.mu
	opened   []Phase   // the host's side of the call that opened it (Timeline); under Manager.mu
}

// healthEvery is how often a call checks its desktop's health: a check
// is six processes in the sandbox, several times the cost of an action.
const healthEvery = 10 * time.Second

// New returns a manager.
func New(cfg Config) *Manager {
	cfg = withDefaults(cfg)
	return &Manager{cfg: cfg, log: cfg.Logger, undrawn: newUndrawn(cfg.Meter), sessions: map[string]*session{}}
}

// withDefaults is cfg with its zero values replaced by the defaults.
func withDefaults(cfg Config) Config {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.StreamWait <= 0 {
		cfg.StreamWait = DefaultStreamWait
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		cfg.Width, cfg.Height = DefaultWidth, DefaultHeight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Meter == nil {
		cfg.Meter = telemetry.Meter()
	}
	return cfg
}

// identity is the desktop session's identity for a conversation's path.
func identity(id contexts.Identity) contexts.Identity {
	if id.PathID == "" {
		id.PathID = contexts.DefaultPath
	}
	if !strings.HasPrefix(id.PathID, PathPrefix) {
		id.PathID = PathPrefix + id.PathID
	}
	return id
}

// Health says which parts of a desktop answer.
type Health struct {
	X             bool `json:"x"`             // the X server (xdpyinfo)
	WindowManager bool `json:"windowManager"` // xfwm4
	Browser       bool `json:"browser"`       // Chromium's DevTools endpoint
	Stream        bool `json:"stream"`        // noVNC's page
	// starting: the browser does not answer but one runs or starts
	// (browserLock is held): not a failure.
	starting bool
}

// OK reports whether everything answers.
func (h Health) OK() bool { return h.X && h.WindowManager && h.Browser && h.Stream }

// failed reports whether a part stopped: X, the window manager or the
// stream does not answer, or the browser neither answers nor starts. A
// browser still starting (it takes seconds after a session opens) is not
// a failure.
func (h Health) failed() bool {
	return !h.X || !h.WindowManager || !h.Stream || !h.Browser && !h.starting
}

// httpProbe is a shell function: probe URL exits 0 when URL answers. A
// part that answers late is slow, not stopped: a request that times out
// after 1 s is asked again for up to 5 s more, and only one that refuses,
// fails or stays silent that long counts as stopped (a loaded machine's
// browser or websockify took more than 1 s to answer, and the session's
// parts were restarted while they ran).
const httpProbe = `probe() { curl -fsS -m 1 -o /dev/null "$1"; r=$?; [ $r -ne 28 ] && return $r; curl -fsS -m 5 -o /dev/null "$1"; }`

// healthScript prints one line per part: its name and 0 (answers) or not.
var healthScript = fmt.Sprintf(httpProbe+`
xdpyinfo >/dev/null 2>&1; echo x $?
pgrep -x xfwm4 >/dev/null; echo wm $?
probe http://127.0.0.1:%d/json/version & b=$!
probe http://127.0.0.1:%d/vnc.html; s=$?
wait $b; echo browser $?; echo stream $s
flock -n %s true; echo idle $?`, DevToolsPort, StreamPort, browserLock)

func parseHealth(out string) Health {
	var h Health
	for _, line := range strings.Split(out, "\n") {
		name, code, _ := strings.Cut(strings.TrimSpace(line), " ")
		ok := code == "0"
		switch name {
		case "x":
			h.X = ok
		case "wm":
			h.WindowManager = ok
		case "browser":
			h.Browser = ok
		case "stream":
			h.Stream = ok
		case "idle": // browserLock could not be taken: a browser holds it
			h.starting = !ok
		}
	}
	return h
}

// sessionScript starts what every desktop runs, each part only when it
// does not run yet, as much at once as the parts allow: the stream's web
// side (websockify, which needs no X) beside the X server (the SDK's own
// command line; warmMarker notes its screen for the Xvfb shim), then the
// XFCE session. The session starts on a bus of its own without
// startxfce4's shell chain (its xinitrc runs xdg-user-dirs-update, and
// xrdb through the C preprocessor), with the environment startxfce4 would
// give it, and without the accessibility bus (nothing in the image
// provides it; every GTK program would ask for it). Its clients (xfwm4,
// xfsettingsd, the panel, Thunar, xfdesktop) start at once: the session's
// own order starts them one priority group after another, each waiting
// for the one before to register, which left the screen black for 3-6 s
// after the window manager (docs/desktop.md); the user's copy of the
// session's settings gives them one priority. The stream listens on all
// addresses (the ports route reaches it on the sandbox's address).
// (The pattern that finds websockify is anchored: unanchored, it would
// find this script's own command line.)
func sessionScript(w, h int) string {
	return fmt.Sprintf(`export DISPLAY=:0 NO_AT_BRIDGE=1
pgrep -f '^[^ ]*python3 [^ ]*websockify .* %[4]d ' >/dev/null || setsid -f websockify --web /opt/noVNC %[4]d localhost:%[3]d >/tmp/.desktop-novnc.log 2>&1 </dev/null
if ! xdpyinfo >/dev/null 2>&1; then
  echo %[1]dx%[2]dx24 >%[5]s
  setsid -f /usr/bin/Xvfb :0 -ac -screen 0 %[1]dx%[2]dx24 -retro -dpi 96 -nolisten tcp -nolisten unix >/tmp/.desktop-xvfb.log 2>&1 </dev/null
  for i in $(seq 500); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.02; done
fi
`+xfceStart+`
`, w, h, vncPort, StreamPort, warmMarker)
}

// The desktop's long-lived parts (Xvfb, the XFCE session, websockify)
// run in sessions of their own (setsid): they belong to the sandbox, not
// to the exec that started them, so an exec that ends or is killed with
// its process group (a warm-up's, a ready wait's) takes none of them
// along. Seen before: a desktop whose X server and session vanished
// while the sandbox lived, and websockify, started by a later exec,
// stayed.

// xfceStart starts the XFCE session unless it runs (its clients all at
// once: one start priority), logging to /tmp/.desktop-xfce.log. It is
// safe to run again: readyScript does, once, when the session is gone
// before its window manager came up.
const xfceStart = `pgrep -x xfce4-session >/dev/null || {
  conf=~/.config/xfce4/xfconf/xfce-perchannel-xml sys=/etc/xdg/xfce4/xfconf/xfce-perchannel-xml/xfce4-session.xml
  mkdir -p ~/.cache "$conf"
  [ -e "$conf/xfce4-session.xml" ] || ! [ -f "$sys" ] ||
    sed 's/_Priority" type="int" value="[0-9]*"/_Priority" type="int" value="15"/' "$sys" >"$conf/xfce4-session.xml"
  XDG_CURRENT_DESKTOP=XFCE XDG_MENU_PREFIX=xfce- DESKTOP_SESSION=xfce XDG_CONFIG_DIRS=/etc/xdg XDG_DATA_DIRS=/usr/local/share:/usr/share \
    exec setsid dbus-launch --exit-with-session xfce4-session >>/tmp/.desktop-xfce.log 2>&1 </dev/null
} &`

// stackScript is sessionScript and x11vnc, started anew for the
// session's password, held for the sandbox's life. The browser is not
// started here (see browserScript). The stream asks for the session's VNC
// password; x11vnc and the DevTools endpoint listen on loopback only.
func stackScript(w, h int) string {
	return sessionScript(w, h) + fmt.Sprintf(`mkdir -p ~/.vnc && x11vnc -storepasswd "$VNC_PASSWORD" ~/.vnc/passwd >/dev/null 2>&1
pkill -x x11vnc && sleep 0.2
x11vnc -display :0 -forever -shared -localhost -rfbport %d -rfbauth ~/.vnc/passwd -quiet >/tmp/.desktop-x11vnc.log 2>&1 &
wait`, vncPort)
}

// browserLock is held by the session's browser for its life (an
// inherited descriptor): while it is held, a browser runs or starts.
const browserLock = "/tmp/.desktop-browser.lock"

// browserScript starts Chromium unless one runs or starts (browserLock).
// It runs after the call that opened the session: on two cores Chromium's
// start (seconds of CPU) beside XFCE's would delay the session's first
// screenshot by as much. The lock, not a look for the process, says
// whether one runs: a second Chromium started while the first has not yet
// set up its profile's singleton loses what it was asked to open.
const browserScript = `exec 9>>` + browserLock + `
flock -n 9 || exit 0
exec chromium about:blank >/tmp/.desktop-chromium.log 2>&1`

// browserEnv is browserScript's environment.
var browserEnv = map[string]string{"DISPLAY": ":0", "NO_AT_BRIDGE": "1"}

// use runs fn in the session of id, starting the session (and its
// desktop) when needed, and extends the session by the TTL.
func (m *Manager) use(ctx context.Context, id contexts.Identity, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error {
	did := identity(id)
	var recID string
	opts := contexts.CreateOptions{Template: Template, TTL: m.cfg.TTL, FixedExpiry: true, MaxExecutions: -1, Network: m.cfg.Network, Env: Env}
	browser := false
	err := m.cfg.Contexts.Use(ctx, did, opts, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		recID = rec.ID
		in := time.Now()
		var opened *session
		var err error
		if browser, opened, err = m.ensure(ctx, did, rec, sb); err != nil {
			return err
		}
		ready := time.Now()
		err = fn(ctx, rec, sb)
		if opened != nil {
			m.mu.Lock()
			opened.opened = []Phase{{"host:sandbox", in}, {"host:ready", ready}, {"host:answered", time.Now()}}
			m.mu.Unlock()
		}
		return err
	})
	if browser {
		m.spawn(did, recID, browserScript, browserEnv, "desktop-browser")
	}
	if err != nil {
		return err
	}
	// The session's expiry is absolute (a desktop's processes run in
	// calls that never end, which must not keep it alive); each call
	// moves it: the session ends TTL after its last call.
	if _, err := m.cfg.Contexts.SetTTL(ctx, id.TenantID, recID, m.cfg.TTL); err != nil {
		m.log.Debug("desktop: extend session", logkey.Context, recID, logkey.Err, err)
	}
	return nil
}

// ensure starts the desktop of rec unless this manager already did and
// it still answers; browser says the browser is to be started after the
// call: the desktop was (re)started, or the browser did not answer the
// health check (browserScript starts none while one runs, so a browser
// still starting is left alone and one that died is started again).
// opened is the session when this call opened it.
func (m *Manager) ensure(ctx context.Context, did contexts.Identity, rec *contexts.Record, sb contexts.Sandbox) (browser bool, opened *session, err error) {
	m.mu.Lock()
	s := m.sessions[rec.ID]
	m.mu.Unlock()
	if s != nil {
		m.mu.Lock()
		fresh := time.Since(s.healthy) < healthEvery
		m.mu.Unlock()
		if fresh {
			return false, nil, nil
		}
		h, err := m.health(ctx, sb)
		if err != nil {
			return false, nil, err
		}
		if !h.failed() {
			m.mu.Lock()
			s.healthy = time.Now()
			m.mu.Unlock()
			return !h.Browser, nil, nil
		}
		m.cfg.Contexts.HealthCheckFailed(rec)
		if h.X && h.WindowManager && h.Stream {
			m.log.Info("desktop: the browser stopped; starting it again", logkey.Context, rec.ID)
			return true, nil, nil
		}
		m.log.Info("desktop: restarting parts that stopped", logkey.Context, rec.ID, "health", fmt.Sprintf("%+v", h))
	} else {
		s = &session{password: password()}
		m.mu.Lock()
		if old := m.sessions[rec.ID]; old != nil {
			s = old
		} else {
			m.sessions[rec.ID] = s
			opened = s
		}
		m.mu.Unlock()
	}
	m.spawn(did, rec.ID, stackScript(m.cfg.Width, m.cfg.Height), map[string]string{"VNC_PASSWORD": s.password}, "desktop")
	return true, opened, waitReady(ctx, sb, readiness{wait: m.cfg.StreamWait, stage: "open"}, m.undrawn, m.log, rec.ID)
}

// spawn runs script in the session's sandbox for as long as the
// sandbox lives: confined to this context, never creating another. When
// it fails to run (the sandbox is gone, or never answered), the session
// is forgotten, to start over on the next call.
func (m *Manager) spawn(did contexts.Identity, contextID, script string, env map[string]string, tag string) {
	go func() {
		err := m.cfg.Contexts.Use(context.Background(), did, contexts.CreateOptions{ContextID: contextID}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			_, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/bash", "-c", script}, Env: env, TimeoutMs: -1, Tag: tag}, nil)
			return err
		})
		m.log.Debug("desktop: background exec ended", logkey.Context, contextID, "tag", tag, logkey.Err, err)
		if err != nil {
			m.forget(contextID)
		}
	}()
}

func (m *Manager) forget(contextID string) {
	m.mu.Lock()
	delete(m.sessions, contextID)
	m.mu.Unlock()
}

func (m *Manager) health(ctx context.Context, sb contexts.Sandbox) (Health, error) {
	res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/bash", "-c", healthScript}, Env: map[string]string{"DISPLAY": ":0"}, TimeoutMs: 20_000, Tag: "desktop-health"}, nil)
	if err != nil {
		return Health{}, err
	}
	return parseHealth(res.Stdout), nil
}

// password is a VNC password: VNC authentication uses its first 8 bytes.
func password() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Health opens (or reuses) the session of id and reports which parts of
// its desktop answer.
func (m *Manager) Health(ctx context.Context, id contexts.Identity) (Health, error) {
	var h Health
	err := m.use(ctx, id, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		var err error
		h, err = m.health(ctx, sb)
		return err
	})
	return h, err
}

// Screenshot is a PNG of the screen.
type Screenshot struct {
	PNG           []byte
	Width, Height int
}

// Screenshot takes a screenshot of the session's screen. The PNG leaves
// through the guard's file path, which keeps it a valid PNG and scans its
// metadata; the pixels cannot be redacted (docs/desktop.md).
func (m *Manager) Screenshot(ctx context.Context, id contexts.Identity) (*Screenshot, error) {
	var out *Screenshot
	err := m.use(ctx, id, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		const path = "/tmp/.desktop-screenshot.png"
		if err := m.run(ctx, sb, "scrot", "-o", "-p", path); err != nil {
			return err
		}
		var buf bytes.Buffer
		err := contexts.ReadFile(ctx, sb, path, func(c contexts.FileChunk) error {
			if buf.Len()+len(c.Data) > 64<<20 {
				return fmt.Errorf("screenshot larger than 64 MiB: %w", errdefs.ErrResourceExhausted)
			}
			buf.Write(c.Data)
			return nil
		})
		if err != nil {
			return err
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(buf.Bytes()))
		if err != nil {
			return fmt.Errorf("screenshot is not a PNG: %v: %w", err, errdefs.ErrUnavailable)
		}
		out = &Screenshot{PNG: buf.Bytes(), Width: cfg.Width, Height: cfg.Height}
		return nil
	})
	return out, err
}

// run runs argv on the session's display; a non-zero exit is an error
// with its (guarded) stderr.
func (m *Manager) run(ctx context.Context, sb contexts.Sandbox, argv ...string) error {
	_, err := m.output(ctx, sb, argv...)
	return err
}

func (m *Manager) output(ctx context.Context, sb contexts.Sandbox, argv ...string) (string, error) {
	res, err := sb.Exec(ctx, agent.ExecParams{Argv: argv, Env: map[string]string{"DISPLAY": ":0"}, TimeoutMs: 30_000, Tag: "desktop"}, nil)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%s: exit %d: %s: %w", argv[0], res.ExitCode, strings.TrimSpace(res.Stderr), errdefs.ErrFailedPrecondition)
	}
	return res.Stdout, nil
}

// itoa is strconv.Itoa, short.
func itoa(n int) string { return strconv.Itoa(n) }
