package server

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/proc"
)

// The spare login shell. E2B's SDKs run every command as
// `/bin/bash -l -c CMD`; starting that bash (fork, exec, loading, and a
// login profile that itself forks `id -u` on Debian) was most of a first
// command's start. The agent keeps one such shell of the default user
// started ahead, its profile read, blocked reading its command on fd 3.
// A command of exactly that form, for the default user, with no
// variables of its own, in the home directory, takes it: the agent
// writes to fd 3 exports of what the base environment gained since the
// spare started (env.set) and the command; the shell closes fd 3 and
// evaluates them. The spare's pid, pipes, process group, user,
// environment and working directory are those of the process the command
// would have started. Anything else (another user, variables of its own,
// another directory, a terminal, a long command) starts its own bash as
// before.
//
// What differs from a fresh `bash -l -c CMD`, documented in docs/e2b-lifecycle.md:
// the profile ran when the spare started, not when the command came (a
// change to one of the login files, loginFiles, discards the spare; what
// a profile reads beyond them is read at the spare's start, and it did
// not see what env.set added later), the command runs through eval
// (bash's exec of a last simple command does not apply: `sleep 9` is a
// child of the shell, in its process group; BASH_EXECUTION_STRING is the
// loader), and a spare is visible to `ps` while it waits.

const (
	// spareMaxCmd bounds the commands a spare takes (with the exports
	// before them): one small write into the socket's empty buffer,
	// which never blocks.
	spareMaxCmd = 4095
	// spareRefill is how long after a take the next spare starts at the
	// latest (sooner when the command ends): off the taking command's
	// start, which it would compete with for the CPU.
	spareRefill = 100 * time.Millisecond
	// spareAfterEnd is how long after the taking command ended the next
	// spare starts (sooner than spareRefill).
	spareAfterEnd = 25 * time.Millisecond
)

// spareIdle is how long a spare nobody took is kept: a sandbox that runs
// no command stops paying for it (a pid, a bash's memory); the next
// command starts its own and a new spare after it. A variable for tests.
var spareIdle = 5 * time.Minute

// spareLoader is the spare's -c script: read the variables the base
// environment gained since the spare started (export statements the
// agent quoted) and the command, each up to its NUL, from fd 3, close
// fd 3, and evaluate them with the loader's variables gone.
const spareLoader = `IFS= read -r -d '' -u 3 SANDLOT_SPARE_ENV; IFS= read -r -d '' -u 3 SANDLOT_SPARE_CMD; exec 3<&-; eval "unset SANDLOT_SPARE_ENV SANDLOT_SPARE_CMD; $SANDLOT_SPARE_ENV eval ${SANDLOT_SPARE_CMD@Q}"`

// spareShell is one login shell started ahead.
type spareShell struct {
	p     *proc.Process
	sio   *stdio   // the parent's ends: stdin writer, stdout and stderr readers
	cmdW  *os.File // the agent's end of fd 3's socket: the command goes there
	env   []string // the environment it started with
	cwd   string
	uid   uint32
	files []fileStamp // the login files as they were when it started
	idle  *time.Timer
}

// loginSpare holds the default user's spare login shell (at most one).
type loginSpare struct {
	mu       sync.Mutex
	cur      *spareShell
	starting bool
	closed   bool // the agent stopped: no more spares
}

// fileStamp is what a stat says of one login file; equal stamps say it
// did not change (the same inode, size, times and mode, or absent both
// times).
type fileStamp struct {
	path         string
	exists       bool
	ino, size    uint64
	mtime, ctime int64
	mode         uint32
}

// loginFiles are the files a Debian login shell reads, or tests, before
// the command: /etc/profile (and /etc/profile.d), the first of the
// user's profiles, and what Debian's ~/.profile reads or tests.
func loginFiles(home string) []string {
	files := []string{"/etc/profile", "/etc/profile.d", "/etc/bash.bashrc"}
	if ents, err := os.ReadDir("/etc/profile.d"); err == nil {
		for _, e := range ents {
			files = append(files, filepath.Join("/etc/profile.d", e.Name()))
		}
	}
	for _, f := range []string{".bash_profile", ".bash_login", ".profile", ".bashrc", "bin", ".local/bin"} {
		files = append(files, filepath.Join(home, f))
	}
	return files
}

func stampFiles(paths []string) []fileStamp {
	out := make([]fileStamp, 0, len(paths))
	for _, p := range paths {
		st := fileStamp{path: p}
		var s unix.Stat_t
		if unix.Stat(p, &s) == nil {
			st.exists = true
			st.ino, st.size, st.mode = s.Ino, uint64(s.Size), s.Mode
			st.mtime, st.ctime = s.Mtim.Nano(), s.Ctim.Nano()
		}
		out = append(out, st)
	}
	return out
}

// spareCommand returns the command of an exec a spare can run: exactly
// `/bin/bash -l -c CMD` with no terminal, CMD short and without NUL.
func spareCommand(p agent.ExecParams) (string, bool) {
	a := p.Argv
	if p.Pty != nil || p.Shell != "" || len(a) != 4 || a[0] != "/bin/bash" || a[1] != "-l" || a[2] != "-c" {
		return "", false
	}
	if len(a[3]) > spareMaxCmd || strings.IndexByte(a[3], 0) >= 0 {
		return "", false
	}
	return a[3], true
}

// fillSpare starts the default user's spare unless one is there or starting.
// It runs on its own goroutine, after the agent is ready for user code.
func (s *Server) fillSpare() {
	ls := s.spare
	ls.mu.Lock()
	if ls.cur != nil || ls.starting || ls.closed {
		ls.mu.Unlock()
		return
	}
	ls.starting = true
	ls.mu.Unlock()
	go func() {
		sp := s.startSpare()
		ls.mu.Lock()
		ls.starting = false
		if sp != nil && ls.closed {
			sp.end()
		} else if sp != nil {
			ls.cur = sp
			sp.idle = time.AfterFunc(spareIdle, func() { s.dropSpare(sp) })
		}
		ls.mu.Unlock()
	}()
}

// fillSpareLater starts the next spare spareRefill from now: not beside
// the command that starts its own bash now.
func (s *Server) fillSpareLater() { time.AfterFunc(spareRefill, s.fillSpare) }

// startSpare starts a login shell of the default user in its home, or
// returns nil when it cannot (no bash, the pids limit full).
func (s *Server) startSpare() *spareShell {
	if _, err := os.Stat("/bin/bash"); err != nil {
		return nil
	}
	who, err := s.account(agent.DefaultUser)
	if err != nil {
		return nil
	}
	env := who.env(s.baseEnv())
	cwd := resolveIn(who.home, "")
	files := stampFiles(loginFiles(who.home))
	sio, err := openStdio(nil, who.cred)
	if err != nil {
		return nil
	}
	// The command goes over a socket, not a pipe: the spare's end of a
	// pipe opens, through /proc/PID/fd/3, as the pipe itself for any
	// process of its user, who could then write a command ahead of the
	// agent's; a socket does not open there, and what is written into the
	// spare's end goes to the agent, which sees it (clean).
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		sio.closeChild()
		sio.closeParent()
		return nil
	}
	cmdW := os.NewFile(uintptr(fds[0]), "spare-cmd")
	pr, err := proc.Start([]string{"/bin/bash", "-l", "-c", spareLoader}, proc.Attr{
		Dir:   cwd,
		Env:   env,
		Files: append(append([]uintptr(nil), sio.child...), uintptr(fds[1])),
		Cred:  who.cred,
	})
	sio.closeChild()
	unix.Close(fds[1])
	if err != nil {
		sio.closeParent()
		cmdW.Close()
		return nil
	}
	return &spareShell{p: pr, sio: sio, cmdW: cmdW, env: env, cwd: cwd, uid: who.uid, files: files}
}

// takeSpare hands the command to the spare when the exec is one it can
// run as the process the exec would start, and returns it; nil: the exec
// starts its own process. A spare found dead, tampered with (anything
// in its pipes) or stale (its environment or the login files changed)
// is ended, and another started.
func (s *Server) takeSpare(p agent.ExecParams, who *account, env []string, cwd string) *spareShell {
	cmd, ok := spareCommand(p)
	if !ok || p.User != "" && p.User != agent.DefaultUser {
		return nil
	}
	ls := s.spare
	ls.mu.Lock()
	sp := ls.cur
	if sp == nil {
		ls.mu.Unlock()
		s.fillSpareLater() // for the next command
		return nil
	}
	if len(p.Env) > 0 || sp.uid != who.uid || sp.cwd != cwd {
		// This exec differs (a command's own variables never pass
		// through a spare); the spare stays for one that does not.
		ls.mu.Unlock()
		return nil
	}
	exports, ok := envGained(sp.env, env)
	if !ok || len(exports)+len(cmd)+2 > spareMaxCmd+1 {
		// The base environment lost or renamed something since the
		// spare started: it no longer fits any command.
		ls.cur = nil
		ls.mu.Unlock()
		sp.idle.Stop()
		sp.end()
		s.fillSpareLater()
		return nil
	}
	ls.cur = nil
	ls.mu.Unlock()
	sp.idle.Stop()
	if !sp.clean() || !slices.Equal(sp.files, stampFiles(loginFiles(who.home))) {
		sp.end()
		s.fillSpareLater()
		return nil
	}
	msg := make([]byte, 0, len(exports)+len(cmd)+2)
	msg = append(append(append(append(msg, exports...), 0), cmd...), 0)
	if _, err := sp.cmdW.Write(msg); err != nil {
		sp.end()
		s.fillSpareLater()
		return nil
	}
	sp.cmdW.Close()
	go func() {
		// The next spare: once the command ended, a little later (a
		// sandbox killed right after its command never starts one), or
		// spareRefill after the take for a command that runs on.
		t := time.NewTimer(spareRefill)
		defer t.Stop()
		select {
		case <-sp.p.Done():
			time.Sleep(spareAfterEnd)
		case <-t.C:
		}
		s.fillSpare()
	}()
	return sp
}

// dropSpare ends sp if it is still the spare (its idle time ran out).
func (s *Server) dropSpare(sp *spareShell) {
	ls := s.spare
	ls.mu.Lock()
	if ls.cur != sp {
		ls.mu.Unlock()
		return
	}
	ls.cur = nil
	ls.mu.Unlock()
	sp.end()
}

// closeSpare ends the spare, if any (the agent stops).
func (s *Server) closeSpare() {
	ls := s.spare
	ls.mu.Lock()
	sp := ls.cur
	ls.cur, ls.closed = nil, true
	ls.mu.Unlock()
	if sp != nil {
		sp.idle.Stop()
		sp.end()
	}
}

// clean says the spare is alive, not stopped, and nothing was written
// into its pipes or its socket since it started: nothing from its side of
// fd 3, no input on its stdin, no output (the loader writes none).
func (sp *spareShell) clean() bool {
	if sp.p.Exited() || !runnable(sp.p.Pid) {
		return false
	}
	for _, f := range []*os.File{sp.cmdW, sp.sio.inW, sp.sio.outR, sp.sio.errR} {
		if n, err := pipeBytes(f); err != nil || n != 0 {
			return false
		}
	}
	return !sp.p.Exited()
}

// end kills the spare's process group and closes the agent's ends.
func (sp *spareShell) end() {
	if !sp.p.Exited() {
		_ = sp.p.SignalGroup(syscall.SIGKILL)
	}
	sp.cmdW.Close()
	sp.sio.closeParent()
}

// pipeBytes is how many bytes wait to be read in the pipe f is an end
// of, or at the socket f is. It goes
// through the raw descriptor without making f blocking (exec sets read
// deadlines on the output pipes).
func pipeBytes(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var ierr error
	// TIOCINQ is FIONREAD (and SIOCINQ): the bytes waiting.
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ierr
}

// stopOrKill is the mask of SIGKILL, SIGSTOP, SIGTSTP, SIGTTIN and
// SIGTTOU in /proc/PID/status (signal n is bit n-1).
const stopOrKill = 1<<(9-1) | 1<<(19-1) | 1<<(20-1) | 1<<(21-1) | 1<<(22-1)

// runnable says the process pid is running, or sleeping in a wait it
// leaves by itself (not stopped by a signal or a tracer, not a zombie),
// with no stop or kill signal pending: a SIGSTOP sent just before is pending until
// the process is scheduled to take it.
func runnable(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	ok := false
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			ok = v != "" && strings.ContainsRune("RSD", rune(v[0]))
		case "SigPnd", "ShdPnd":
			// Stop and kill signals; others (a SIGCHLD while the
			// profile runs) are the shell's business.
			if m, err := strconv.ParseUint(v, 16, 64); err != nil || m&stopOrKill != 0 {
				return false
			}
		}
	}
	return ok
}

// envGained returns export statements that take a spare started with
// had to want, and whether want only adds or changes variables with
// names a shell can export (env.set's, such as a warm sandbox's
// identity): a removed variable, or a name the shell cannot export, is
// false.
func envGained(had, want []string) (string, bool) {
	if slices.Equal(had, want) {
		return "", true
	}
	old := make(map[string]string, len(had))
	for _, kv := range had {
		k, v, _ := strings.Cut(kv, "=")
		old[k] = v
	}
	var b strings.Builder
	seen := 0
	for _, kv := range want {
		k, v, _ := strings.Cut(kv, "=")
		if ov, ok := old[k]; ok {
			seen++
			if ov == v {
				continue
			}
		}
		if !envName.MatchString(k) {
			return "", false
		}
		b.WriteString("export " + k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'; ")
	}
	return b.String(), seen == len(old)
}
