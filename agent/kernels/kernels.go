// Package kernels runs sandlot's persistent code kernels inside the sandbox:
// python (embedded driver, /usr/bin/python3 -u), javascript and typescript
// (embedded node driver; a typescript cell arrives transpiled by the host), a
// persistent bash session, one-shot sh, and, where the image has them, R
// (embedded driver run by Rscript) and Java (an embedded JShell driver run
// by java's source launcher).
//
// A kernel is a child process with user output on its fd 1 and 2 (pipes,
// so subprocesses' output is captured in order), commands on fd 3 and
// results on fd 4. Kernels start lazily on first use, one per (language,
// name); runs on one kernel are serialized.
package kernels

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/outbuf"
	"github.com/sandlot/sandlot/errdefs"
)

//go:embed driver.js
var nodeDriver string

//go:embed driver.R
var rDriver string

// rBoot is the R kernel's -e program: it runs the driver from stdin (a
// sealed memfd). Rscript passes at most 10,000 bytes of -e to R, each
// space and newline counted as three, and drops a longer program with a
// warning (R then reads its commands from stdin); the driver itself had
// come within 600 bytes of that.
const rBoot = `eval(parse("stdin", keep.source = FALSE))`

//go:embed driver.java
var javaDriver []byte

// bashDriver reads "<id>\0<code>\0<after>\0" from fd 3, evals the code at
// top level (so variables, functions, cwd and exports persist), then
// after (which restores the run's env), and reports the code's exit status
// on fd 4. Builtins are called through `builtin` so user functions named
// printf or read cannot break the loop.
const bashDriver = `while IFS= builtin read -r -d '' __sandlot_id <&3 && IFS= builtin read -r -d '' __sandlot_code <&3 && IFS= builtin read -r -d '' __sandlot_after <&3; do
eval "$__sandlot_code"
__sandlot_rc=$?
eval "$__sandlot_after"
builtin printf '{"id":%s,"exitCode":%d}\n' "$__sandlot_id" "$__sandlot_rc" >&4
done
`

// Defaults.
const (
	DefaultTimeout = 60 * time.Second
	MaxTimeout     = 600 * time.Second
	interruptGrace = 2 * time.Second
	nodeGrace      = 500 * time.Millisecond
)

// ShellFunc runs a one-shot shell command (the server's exec); sh uses it.
type ShellFunc func(ctx context.Context, p agent.ExecParams, out func(agent.OutputEvent)) (*agent.ExecResult, error)

// Config configures a Manager. Zero values are documented per field.
type Config struct {
	Home   string   // working directory of new kernels; "": /home/user
	Env    []string // base environment of kernels; nil: os.Environ()
	Python string   // "": /usr/bin/python3, else python3 on PATH
	Node   string   // "": /usr/bin/node, else node on PATH
	Bash   string   // "": /bin/bash
	R      string   // Rscript; "": /usr/bin/Rscript, else Rscript on PATH
	Java   string   // "": /usr/bin/java, else java on PATH
	Shell  ShellFunc
	// IPython runs every python cell through IPython
	// (RunCodeParams.IPython), and python kernels import it as they
	// start. false: only cells that ask for it.
	IPython bool
	// User resolves the user a kernel runs as (RunCodeParams.User). nil:
	// every kernel runs as the agent, in Home, and only the default user
	// exists.
	User   UserFunc
	Logger *slog.Logger // nil discards
}

// UserFunc resolves a user name ("" is agent.DefaultUser): the credential
// of its kernels (nil: the agent's own), their base environment and their
// working directory. An unknown or unavailable user is an error to return
// to the caller as it is.
type UserFunc func(name string) (cred *syscall.Credential, env []string, home string, err error)

// Manager owns the kernels of one agent.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	kernels map[key]*kernel

	// late is the environment added after kernels may have started
	// (SetEnv), lateGen counts its changes; a session started before the
	// latest change gets late with each run (its process environment
	// predates it).
	late    atomic.Pointer[map[string]string]
	lateGen atomic.Int64
}

type key struct{ lang, name, user string }

// kernel is one (language, name) instance; its session is started lazily.
type kernel struct {
	lang string
	user string
	mu   sync.Mutex // serializes runs and guards the fields below
	s    *session   // nil until started, and after a restart
	// cur mirrors s for Restart, which must reach a busy kernel without
	// waiting for kn.mu (the run holding it may be the reason for restarting).
	cur   atomic.Pointer[session]
	count int   // executions since start
	id    int64 // last command id
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Home == "" {
		cfg.Home = "/home/user"
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	cfg.Python = findBinary(cfg.Python, "/usr/bin/python3", "python3")
	cfg.Node = findBinary(cfg.Node, "/usr/bin/node", "node")
	cfg.Bash = findBinary(cfg.Bash, "/bin/bash", "bash")
	cfg.R = findBinary(cfg.R, "/usr/bin/Rscript", "Rscript")
	cfg.Java = findBinary(cfg.Java, "/usr/bin/java", "java")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: cfg.Logger, kernels: make(map[key]*kernel)}
}

func findBinary(configured, def, name string) string {
	if configured != "" {
		return configured
	}
	if _, err := os.Stat(def); err == nil {
		return def
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return def
}

// kernelLang maps a request language to the kernel that runs it:
// typescript runs in the javascript kernel after transpiling.
func kernelLang(lang string) string {
	if lang == agent.TypeScript {
		return agent.JavaScript
	}
	return lang
}

func (m *Manager) get(lang, name, user string) *kernel {
	if user == agent.DefaultUser {
		user = ""
	}
	k := key{kernelLang(lang), name, user}
	m.mu.Lock()
	defer m.mu.Unlock()
	kn := m.kernels[k]
	if kn == nil {
		kn = &kernel{lang: k.lang, user: user}
		m.kernels[k] = kn
	}
	return kn
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Error is a categorised failure of a run (not an error of user code, which
// is a result).
type Error struct {
	Category errdefs.Code
	Msg      string
}

func (e *Error) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &Error{Category: errdefs.CodeInvalidArgument, Msg: fmt.Sprintf(format, args...)}
}

// Timeout is the wall-clock limit of one execution (kernel run or exec)
// asked for with timeoutMs: DefaultTimeout for 0 or less, at most
// MaxTimeout.
func Timeout(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return DefaultTimeout
	case ms >= MaxTimeout.Milliseconds():
		return MaxTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// Run executes p in its kernel. cancel, when closed, interrupts the run.
// out (may be nil) receives output events (Ref is left to the caller).
func (m *Manager) Run(ctx context.Context, p agent.RunCodeParams, out func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	for k := range p.Env {
		if !envName.MatchString(k) {
			return nil, invalid("bad environment variable name %q", k)
		}
	}
	timeout := Timeout(p.TimeoutMs)
	if p.TimeoutMs < 0 {
		timeout = 0 // none: only a cancel ends the run
	}
	switch p.Language {
	case agent.Python, agent.JavaScript, agent.TypeScript, agent.Bash, agent.R, agent.Java:
	case agent.Sh:
		return m.runSh(ctx, p, timeout, out)
	default:
		return nil, invalid("unknown language %q (want python, javascript, typescript, bash, sh, r or java)", p.Language)
	}
	// A typescript cell arrives as JavaScript: the host transpiles it
	// (package agent/typescript).
	code := p.Code
	if p.User != "" && m.cfg.User != nil {
		if _, _, _, err := m.cfg.User(p.User); err != nil {
			return nil, err
		}
	} else if p.User != "" && p.User != agent.DefaultUser {
		return nil, invalid("user %q does not exist in the sandbox", p.User)
	}
	kn := m.get(p.Language, p.Kernel, p.User)
	kn.mu.Lock()
	defer kn.mu.Unlock()
	return m.runLocked(ctx, kn, p, code, timeout, out)
}

// runLocked runs code on kn. Precondition: kn.mu is held.
func (m *Manager) runLocked(ctx context.Context, kn *kernel, p agent.RunCodeParams, code string, timeout time.Duration, out func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	start := time.Now()
	restarted := false
	if kn.s != nil && (kn.s.dead || kn.s.p.Exited()) {
		kn.s.kill()
		kn.s = nil
		kn.cur.Store(nil)
		restarted = true
	}
	if kn.s == nil {
		s, err := m.start(kn.lang, kn.user, false)
		if err != nil {
			return nil, startError(kn.lang, err)
		}
		kn.s = s
		kn.cur.Store(s)
		kn.count = 0
	}
	s := kn.s
	s.discard()
	kn.id++
	kn.count++
	cmd, err := encodeCommand(kn.lang, kn.id, kn.count, code, m.runEnv(s, p.Env), p.IPython || m.cfg.IPython)
	if err != nil {
		return nil, err
	}
	if err := s.send(cmd); err != nil {
		// The kernel died between runs: start over once.
		s.kill()
		kn.s = nil
		kn.cur.Store(nil)
		if restarted {
			return nil, &Error{Category: errdefs.CodeUnavailable, Msg: fmt.Sprintf("%s kernel: %v", kn.lang, err)}
		}
		return m.runLocked(ctx, kn, p, code, timeout, out)
	}

	stdout, stderr := outbuf.New(p.MaxOutput), outbuf.New(p.MaxOutput)
	var emit func(stream, data string)
	if p.Stream && out != nil {
		emit = func(stream, data string) { out(agent.OutputEvent{Stream: stream, Data: data}) }
	}
	spec := waitSpec{
		id:     kn.id,
		grace:  interruptGrace,
		cancel: ctx.Done(),
		stdout: stdout,
		stderr: stderr,
		emit:   emit,
	}
	if timeout > 0 {
		spec.deadline = start.Add(timeout)
	}
	switch kn.lang {
	case agent.Python:
		spec.interrupt = syscall.SIGINT
		spec.tag = true
	case agent.R:
		// R signals an interrupt condition, once the cell said it started.
		spec.interrupt = syscall.SIGINT
		spec.started = true
	case agent.Java:
		// The java driver stops the running snippet (JShell.stop), when
		// the cell's tag is in the command pipe: the JVM handles a signal
		// late, on a thread of its own, and may do so in a later cell.
		spec.interrupt = syscall.SIGINT
		spec.tag = true
	case agent.JavaScript:
		// Only an await answers SIGINT; a busy loop is killed soon after.
		spec.interrupt = syscall.SIGINT
		spec.grace = nodeGrace
	}
	o := s.wait(spec)

	r := &agent.RunCodeResult{
		Stdout:          stdout.String(),
		Stderr:          stderr.String(),
		Truncated:       stdout.Truncated() || stderr.Truncated(),
		ExecutionCount:  kn.count,
		TimedOut:        o.timedOut,
		KernelRestarted: restarted,
	}
	if o.res != nil {
		r.Results = o.res.Results
		r.Error = o.res.Error
		r.ExitCode = o.res.ExitCode
	}
	if o.killed {
		kn.s = nil
		kn.cur.Store(nil)
		r.KernelRestarted = true
		if o.res == nil && !o.timedOut && !o.canceled {
			// The kernel died under the user's code (exit, os._exit, crash).
			st := o.exit
			switch {
			case st.Exited():
				r.ExitCode = st.ExitStatus()
			case st.Signaled():
				r.ExitCode = 128 + int(st.Signal())
			}
			if kn.lang != agent.Bash || st.Signaled() {
				r.Error = &agent.ExecError{Name: "KernelDied", Value: fmt.Sprintf("the %s kernel exited (%s); its state is gone", kn.lang, describe(st))}
			}
		}
	}
	if o.timedOut {
		msg := fmt.Sprintf("execution timed out after %s", timeout)
		if o.killed {
			msg += "; the kernel was restarted and its state is gone"
		}
		tb := ""
		if r.Error != nil {
			tb = r.Error.Traceback
		}
		r.Error = &agent.ExecError{Name: "TimeoutError", Value: msg, Traceback: tb}
		if r.ExitCode == 0 {
			r.ExitCode = 124
		}
	}
	if o.canceled {
		r.Error = &agent.ExecError{Name: "Canceled", Value: "execution canceled"}
	}
	if emit != nil {
		for i := range r.Results {
			rr := r.Results[i]
			out(agent.OutputEvent{Stream: agent.Result, Result: &rr})
		}
	}
	r.Success = r.Error == nil && r.ExitCode == 0 && !r.TimedOut
	r.DurationMs = time.Since(start).Milliseconds()
	return r, nil
}

func describe(st syscall.WaitStatus) string {
	switch {
	case st.Exited():
		return "exit status " + strconv.Itoa(st.ExitStatus())
	case st.Signaled():
		return "signal " + st.Signal().String()
	}
	return "unknown status"
}

// start starts a kernel of lang for user; ipython (python only) imports
// IPython as it starts, as Config.IPython does for every python kernel.
func (m *Manager) start(lang, user string, ipython bool) (*session, error) {
	gen := m.lateGen.Load() // before the environment is read: see SetEnv
	s, err := m.startEnv(lang, user, ipython)
	if err == nil {
		s.gen = gen
	}
	return s, err
}

// SetEnv records env, the variables the agent added to its base
// environment (which Config.User returns from now on, so kernels started
// later have them): the runs of kernels started before get them with each
// run. The caller updates the base environment first, then calls SetEnv.
func (m *Manager) SetEnv(env map[string]string) {
	c := maps.Clone(env)
	m.late.Store(&c)
	m.lateGen.Add(1)
}

// runEnv is the environment a run on s gets: p's, under which the late
// environment when s started before its latest change.
func (m *Manager) runEnv(s *session, env map[string]string) map[string]string {
	late := m.late.Load()
	if late == nil || s.gen >= m.lateGen.Load() {
		return env
	}
	out := maps.Clone(*late)
	maps.Copy(out, env)
	return out
}

func (m *Manager) startEnv(lang, user string, ipython bool) (*session, error) {
	env := append([]string(nil), m.cfg.Env...)
	dir := m.cfg.Home
	var cred *syscall.Credential
	if m.cfg.User != nil {
		var err error
		if cred, env, dir, err = m.cfg.User(user); err != nil {
			return nil, err
		}
		env = append([]string(nil), env...)
	}
	var argv []string
	var stdin []byte
	switch lang {
	case agent.Python:
		env = append(env, "MPLBACKEND=Agg", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8")
		if ipython || m.cfg.IPython {
			env = append(env, "SANDLOT_IPYTHON=preload") // the driver unsets it
		}
		argv = []string{m.cfg.Python, "-S", "-u", "-c", pythonBoot}
		stdin = pythonStdin(pythonDriver())
	case agent.JavaScript:
		env = append(env, "NODE_NO_WARNINGS=1")
		argv = []string{m.cfg.Node, "--expose-internals", "-e", nodeDriver}
	case agent.Bash:
		argv = []string{m.cfg.Bash, "--noprofile", "--norc", "-c", bashDriver}
	case agent.R:
		if err := present(m.cfg.R); err != nil {
			return nil, err
		}
		env = utf8Locale(env)
		argv = []string{m.cfg.R, "--no-save", "--no-restore", "-e", rBoot}
		stdin = []byte(rDriver)
	case agent.Java:
		if err := present(m.cfg.Java); err != nil {
			return nil, err
		}
		// The serial collector: fewer threads (a sandbox's pids are
		// bounded) and less memory for a kernel that is mostly idle.
		env = utf8Locale(env)
		argv = []string{m.cfg.Java, "-XX:+UseSerialGC", "-Djava.awt.headless=true", "--source", "11", "/dev/stdin"}
		stdin = javaDriver
	default:
		return nil, fmt.Errorf("no kernel for %q", lang)
	}
	return startSession(argv, env, dir, cred, stdin)
}

func (m *Manager) runSh(ctx context.Context, p agent.RunCodeParams, timeout time.Duration, out func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	if m.cfg.Shell == nil {
		return nil, &Error{Category: errdefs.CodeUnavailable, Msg: "sh is not available"}
	}
	sh := "/bin/sh"
	er, err := m.cfg.Shell(ctx, agent.ExecParams{
		Argv:      []string{sh, "-c", p.Code},
		Env:       p.Env,
		User:      p.User,
		TimeoutMs: timeout.Milliseconds(),
		MaxOutput: p.MaxOutput,
		Stream:    p.Stream,
	}, func(ev agent.OutputEvent) {
		if ev.Stream != agent.Start && out != nil {
			out(ev)
		}
	})
	if err != nil {
		return nil, err
	}
	r := &agent.RunCodeResult{
		Stdout:         er.Stdout,
		Stderr:         er.Stderr,
		ExitCode:       er.ExitCode,
		TimedOut:       er.TimedOut,
		Truncated:      er.Truncated,
		ExecutionCount: 1,
		DurationMs:     er.DurationMs,
	}
	if er.TimedOut {
		r.Error = &agent.ExecError{Name: "TimeoutError", Value: fmt.Sprintf("execution timed out after %s", timeout)}
	}
	r.Success = r.ExitCode == 0 && !r.TimedOut
	return r, nil
}

// Prestart starts the default kernel of lang now instead of on first use,
// so that the first run does not pay the interpreter's start-up. A run that
// arrives meanwhile waits for this start instead of starting its own.
// agent.PrestartIPython is the python kernel with IPython imported.
func (m *Manager) Prestart(lang string) error {
	ipython := false
	switch lang {
	case agent.Python, agent.JavaScript, agent.TypeScript, agent.Bash, agent.R, agent.Java:
	case agent.PrestartIPython:
		lang, ipython = agent.Python, true
	default:
		return invalid("cannot prestart %q", lang)
	}
	kn := m.get(lang, "", "")
	kn.mu.Lock()
	defer kn.mu.Unlock()
	if kn.s != nil {
		return nil
	}
	s, err := m.start(kn.lang, kn.user, ipython)
	if err != nil {
		return startError(kn.lang, err)
	}
	kn.s = s
	kn.cur.Store(s)
	kn.count = 0
	return nil
}

// Restart kills a kernel; the next run starts a fresh one.
func (m *Manager) Restart(p agent.KernelParams) error {
	switch p.Language {
	case agent.Python, agent.JavaScript, agent.TypeScript, agent.Bash, agent.R, agent.Java:
	case agent.Sh:
		return nil
	default:
		return invalid("unknown language %q", p.Language)
	}
	kn := m.get(p.Language, p.Kernel, p.User)
	if s := kn.cur.Load(); s != nil {
		_ = s.p.SignalGroup(syscall.SIGKILL) // a run in progress sees its kernel die
	}
	kn.mu.Lock()
	defer kn.mu.Unlock()
	if kn.s != nil {
		kn.s.kill()
		kn.s = nil
		kn.cur.Store(nil)
	}
	return nil
}

// Close kills every kernel.
func (m *Manager) Close() {
	m.mu.Lock()
	ks := make([]*kernel, 0, len(m.kernels))
	for _, k := range m.kernels {
		ks = append(ks, k)
	}
	m.mu.Unlock()
	for _, kn := range ks {
		kn.mu.Lock()
		if kn.s != nil {
			kn.s.kill()
			kn.s = nil
			kn.cur.Store(nil)
		}
		kn.mu.Unlock()
	}
}
