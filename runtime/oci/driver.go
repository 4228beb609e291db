package oci

// How one runtime binary (crun, runc, runsc) is invoked for one bundle:
// its global flags, detached starts, short commands and their logs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// driver is how to call one runtime binary for one bundle.
type driver struct {
	r    *Runtime
	kind string
	bin  string
	// need is a mount the runtime binary must see (an image root); crun's
	// launcher refreshes its copy of the host's mounts when it lacks it.
	need string
	// network is the namespace a sandbox being created joins (its path),
	// "" for none: crun must see its mount, and runsc must use it.
	network string
	// anySpec has runsc restore a checkpoint into a sandbox whose spec is
	// not the saved one's (a fork with memory, fork.go): gVisor's own
	// comparison only logs, sandlot's (sameForkSpec) was made before.
	anySpec bool
}

func (r *Runtime) driver(kind string) driver {
	if kind == r.kind || kind == "" {
		return driver{r: r, kind: r.kind, bin: r.bin}
	}
	bin, err := exec.LookPath(kind)
	if err != nil {
		bin = kind
	}
	return driver{r: r, kind: kind, bin: bin}
}

// driverFor returns the driver of the runtime that created id.
func (r *Runtime) driverFor(id string) driver {
	if v, ok := r.info.Load(id); ok {
		return r.driver(v.(*sandboxInfo).kind)
	}
	b, err := os.ReadFile(filepath.Join(r.bundle(id), "runtime"))
	if err != nil {
		return r.driver("")
	}
	return r.driver(strings.TrimSpace(string(b)))
}

func (d driver) globalArgs(logPath string) []string {
	args := []string{"--root", filepath.Join(d.r.stateDir, d.kind)}
	if logPath != "" {
		switch d.kind {
		case KindCrun:
			args = append(args, "--log=file:"+logPath)
		default:
			args = append(args, "--log", logPath)
		}
	}
	if d.kind == KindRunsc {
		args = append(args, runscFlags...)
		if d.network != "" {
			args = append(args, runscNetwork)
		}
		if d.anySpec {
			args = append(args, restoreAnySpec)
		}
	}
	return args
}

// cmd builds a runtime invocation with /dev/null stdio in its own session.
func (d driver) cmd(ctx context.Context, logPath string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, d.bin, append(d.globalArgs(logPath), args...)...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A cancelled invocation takes its whole process group (its session's,
	// Setsid), and what left it is met by endCancelled. The parent is not
	// reaped yet when this runs, so the group is still the runtime's.
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	return c
}

// endCancelled ends what is left of a cancelled invocation of the runtime
// for sandbox id, whose process group pgid its Cancel killed, and waits
// until deadline for all of it to go. `crun run --detach` forks a child
// that calls setsid and forks again: that grandchild, in a session of its
// own where the group kill does not reach, goes on creating the sandbox
// (its state, its cgroups, its init), so a cleanup that ran then left
// empty cgroups behind. It keeps the runtime's argv, which names the
// sandbox: every live process whose argv[0] is the runtime's binary and
// whose arguments hold id is killed too, until none is left (one forked
// between two scans is met on the next).
//
// None is left once two scans in a row find none. One is not enough: the
// child forks the grandchild and exits at once, so a child listed alive
// by a scan may fork after the listing and be a zombie when the scan
// reads it, and the grandchild, not listed, went on alone. The next
// scan's listing, taken after that read, holds it. (Each further
// generation that forked and exited so would need one more scan; crun
// has the one.)
func (d driver) endCancelled(pgid int, id string, deadline time.Time) bool {
	wait := time.Millisecond
	for clean := 0; ; {
		if d.killLeft(pgid, id) {
			clean = 0
		} else if clean++; clean == 2 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		// Each scan reads every process's stat: a cleanup that waits
		// long (a loaded host) scans less often.
		time.Sleep(wait)
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// killLeft reports whether a live process (not a zombie) is left of an
// invocation (endCancelled), or /proc could not be listed, and sends
// SIGKILL to each one that runs the runtime's binary for id. Only the
// daemon's own namespaces are looked at: the runtime and what it forks
// run there until the sandbox's init enters its own, and a sandbox's
// processes, whose argv and process groups are theirs to choose, are
// neither read nor counted (the init, not yet in its cgroups, ends when
// the killed runtime's end of its sync socket closes; in its cgroups, the
// delete kills it).
func (d driver) killLeft(pgid int, id string) bool {
	// A listing that failed part way still kills what it listed, and is
	// not known to be clean.
	pids, err := procPIDs()
	own := ownNamespaces()
	left := err != nil
	for _, pid := range pids {
		if !own.holds(pid) {
			continue
		}
		state, pgrp, ok := procStat(pid)
		if !ok || state == "Z" {
			continue
		}
		if pgrp == pgid {
			left = true // killed by Cancel, not reaped yet
			continue
		}
		if d.killRun(pid, id) {
			left = true
		}
	}
	return left
}

// procPIDs lists the processes /proc shows (a variable for tests).
var procPIDs = func() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, err
}

// namespaces are a process's user and pid namespaces, as their links read.
type namespaces struct{ user, pid string }

// ownNamespaces are the daemon's.
func ownNamespaces() namespaces { return namespacesOf("self") }

func namespacesOf(pid string) namespaces {
	u, _ := os.Readlink("/proc/" + pid + "/ns/user")
	p, _ := os.Readlink("/proc/" + pid + "/ns/pid")
	return namespaces{u, p}
}

// holds reports whether process pid is in namespaces n (both known).
func (n namespaces) holds(pid int) bool {
	o := namespacesOf(strconv.Itoa(pid))
	return n.user != "" && n.pid != "" && o == n
}

// killRun sends SIGKILL to process pid if it runs the runtime's binary
// (its argv[0]) with id among its arguments, and reports whether it did.
// The argv is read once to pick a candidate (most processes are not) and
// again after a pidfd is opened on it; the signal goes through that
// pidfd, so a pid reused in between is not signalled (as killIn).
func (d driver) killRun(pid int, id string) bool {
	if !d.runsFor(pid, id) {
		return false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return d.runsFor(pid, id) && unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0) == nil
}

// argvMax bounds what runsFor reads of an argv: the runtime's holds four
// paths at most (each under PATH_MAX) and a few flags, and a process's
// argv can be megabytes.
const argvMax = 64 << 10

// runsFor reports whether process pid's argv is the runtime's binary
// with id among its arguments. argv[0] is read first, alone: most
// processes are not the runtime's, and the rest is read only for those.
func (d driver) runsFor(pid int, id string) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(d.bin)+1)
	if _, err := io.ReadFull(f, head); err != nil || string(head) != d.bin+"\x00" {
		return false
	}
	rest := make([]byte, argvMax)
	n, _ := io.ReadFull(f, rest)
	return slices.Contains(strings.Split(string(rest[:n]), "\x00"), id)
}

// procStat reads process pid's state and process group from
// /proc/<pid>/stat.
func procStat(pid int) (state string, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp ...: comm may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	return f[0], pgrp, err == nil
}

func (d driver) start(c *exec.Cmd) error {
	if d.kind == KindCrun {
		// also for crun bundles found by a runc Runtime
		need := []string{d.r.share, d.r.rootsDir()}
		if d.need != "" {
			need = append(need, d.need)
		}
		if d.network != "" {
			need = append(need, d.network)
		}
		return launcher.start(c, need...)
	}
	return c.Start()
}

// output runs a short runtime command and returns its stdout.
func (d driver) output(ctx context.Context, args ...string) ([]byte, error) {
	c := d.cmd(ctx, "", args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := d.start(c); err != nil {
		return nil, fmt.Errorf("%s %s: %w", d.kind, args[0], err)
	}
	if err := c.Wait(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if isNotExist(msg) {
			return nil, fmt.Errorf("%s %s: %s: %w", d.kind, args[0], msg, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("%s %s: %v: %s", d.kind, args[0], err, msg)
	}
	return out.Bytes(), nil
}

// isNotExist reports a runtime's message for a container it does not have.
// crun's "error loading `<root>/<id>/config.json`" counts: its run was
// killed (a cancelled create) before it copied the config into its state,
// so no command can load the container; runc's state.json missing for the
// same reason reads "container does not exist".
func isNotExist(msg string) bool {
	m := strings.ToLower(msg)
	if strings.Contains(m, "error loading") && strings.Contains(m, "/config.json") {
		return true
	}
	return strings.Contains(m, "does not exist") || strings.Contains(m, "not found") || strings.Contains(m, "no such file")
}

// detached runs `args` with /dev/null stdio and files as descriptors 3...,
// and waits for the runtime binary (not the container) to exit. Errors
// come from the log file.
func (d driver) detached(ctx context.Context, id, logPath string, files []*os.File, args ...string) error {
	null, err := d.r.openNull(id) // never the host's /dev/null (null.go)
	if err != nil {
		return err
	}
	defer null.Close()
	c := d.cmd(ctx, logPath, args...)
	c.Stdin, c.Stdout, c.Stderr = null, null, null
	c.ExtraFiles = files
	if err := d.start(c); err != nil {
		return fmt.Errorf("%s: %w", d.kind, err)
	}
	if err := c.Wait(); err != nil {
		if ctx.Err() != nil {
			// What the cancelled runtime was doing ends before the
			// caller's cleanup looks at the sandbox's state and cgroups.
			if !d.endCancelled(c.Process.Pid, id, time.Now().Add(5*time.Second)) {
				return fmt.Errorf("%s %s: %v (a process of the cancelled runtime still runs): %s", d.kind, args[0], err, logTail(logPath))
			}
		}
		return fmt.Errorf("%s %s: %v: %s", d.kind, args[0], err, logTail(logPath))
	}
	return nil
}

// logTail returns the last messages of a runtime log, one line.
func logTail(p string) string {
	b, err := os.ReadFile(p)
	if err != nil || len(b) == 0 {
		return "no log"
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg != "" {
			line = l.Msg
		}
		msgs = append(msgs, strings.TrimSpace(line))
	}
	if len(msgs) > 3 {
		msgs = msgs[len(msgs)-3:]
	}
	s := strings.Join(msgs, "; ")
	if len(s) > 1000 {
		s = s[len(s)-1000:]
	}
	return s
}
