package server

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// account is who a call runs as.
type account struct {
	name string
	uid  uint32
	gid  uint32
	home string
	// cred is the credential of processes started for the account; nil:
	// the agent's own.
	cred *syscall.Credential
	// sudo: the account can become root (Config.Sudo), so its file calls
	// run as root and give what they create to it (callAs).
	sudo bool
}

// fileOwner is who a file call gives what it creates to, when that is
// not the caller's effective ids (Config.Sudo).
type fileOwner struct{ uid, gid int }

// The sandbox's two accounts. The default user's ids are the ones the
// runtime gives the sandbox user (runtime/oci UID, GID).
const (
	userUID  = 1000
	userGID  = 1000
	rootHome = "/root"
)

// UserIDs name a template's default user (Config.User).
type UserIDs struct {
	Name     string
	UID, GID uint32
}

// ParseUserIDs reads NAME:UID:GID.
func ParseUserIDs(s string) (*UserIDs, error) {
	var u UserIDs
	parts := strings.Split(s, ":")
	if len(parts) != 3 || parts[0] == "" {
		return nil, fmt.Errorf("user %q: want NAME:UID:GID", s)
	}
	uid, err1 := strconv.ParseUint(parts[1], 10, 32)
	gid, err2 := strconv.ParseUint(parts[2], 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q: want NAME:UID:GID with numeric ids", s)
	}
	u.Name, u.UID, u.GID = parts[0], uint32(uid), uint32(gid)
	return &u, nil
}

// account resolves a call's user: "" is the default user. When the agent
// is root of its sandbox (Config.Root), "user" runs with the user's ids
// and no capabilities, and "root" as the agent itself. Otherwise everything
// runs as the agent, and root is refused: the sandbox has no root to give.
func (s *Server) account(name string) (*account, error) {
	switch name {
	case "", agent.DefaultUser:
		if u := s.cfg.User; u != nil && s.cfg.Root {
			// The template's user: its name in USER, its ids; root of
			// the sandbox runs as the agent itself.
			a := &account{name: u.Name, uid: u.UID, gid: u.GID, home: s.cfg.Home}
			if u.UID != 0 {
				a.cred = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{u.GID}}
				a.sudo = s.cfg.Sudo
			}
			return a, nil
		}
		a := &account{name: agent.DefaultUser, uid: userUID, gid: userGID, home: s.cfg.Home}
		if s.cfg.Root {
			a.cred = &syscall.Credential{Uid: userUID, Gid: userGID, Groups: []uint32{userGID}}
			a.sudo = s.cfg.Sudo
		}
		return a, nil
	case agent.RootUser:
		if !s.cfg.Root {
			return nil, errf(errdefs.CodeFailedPrecondition, "user root is not available in this sandbox: its template runs every process as %q without privileges (choose an image template for root)", agent.DefaultUser)
		}
		return &account{name: agent.RootUser, home: rootHome}, nil
	}
	return nil, errf(errdefs.CodeInvalidArgument, "user %q does not exist in the sandbox (users: %q, %q)", name, agent.DefaultUser, agent.RootUser)
}

// env returns base with the account's HOME, USER and LOGNAME.
func (a *account) env(base []string) []string {
	return mergeEnv(base, map[string]string{"HOME": a.home, "USER": a.name, "LOGNAME": a.name})
}

// asAccount runs fn with the file system credentials of a: the calling
// thread's effective uid and gid and its groups are switched (Linux
// credentials are per thread; the raw system calls change only this one;
// the saved uid stays 0 to switch back), so permission checks and the owners
// of created files are a's, and an effective uid other than 0 has no
// capability. setfsuid would do on Linux, but gVisor does not implement it.
// fn must not start goroutines that touch files. A thread whose credentials
// cannot be restored is never returned to the runtime: it exits with its
// goroutine.
func (s *Server) asAccount(a *account, fn func() error) error {
	if a.cred == nil {
		return fn()
	}
	runtime.LockOSThread()
	if err := setThreadIDs(a.cred.Uid, a.cred.Gid, a.cred.Groups); err != nil {
		if setThreadIDs(0, 0, s.groups) == nil {
			runtime.UnlockOSThread()
		}
		return errf(errdefs.CodeInternal, "switch to user %s: %v", a.name, err)
	}
	err := fn()
	if setThreadIDs(0, 0, s.groups) == nil {
		runtime.UnlockOSThread()
	}
	return err
}

// setThreadIDs sets the calling thread's effective uid and gid and its
// groups: to root's in the order root may (uid first, while the thread
// still has capabilities for the rest), to another user's in the reverse.
func setThreadIDs(uid, gid uint32, groups []uint32) error {
	keep := ^uintptr(0) // -1: unchanged
	setUID := func() error {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
			return fmt.Errorf("setresuid: %w", e)
		}
		return nil
	}
	if uid == 0 {
		if err := setUID(); err != nil {
			return err
		}
	}
	n := len(groups)
	g := append(append([]uint32(nil), groups...), 0) // never empty, so &g[0] exists
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(n), uintptr(unsafe.Pointer(&g[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(gid), keep); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if uid != 0 {
		return setUID()
	}
	return nil
}

// kernelUser is the kernels' kernels.UserFunc.
func (s *Server) kernelUser(name string) (*syscall.Credential, []string, string, error) {
	a, err := s.account(name)
	if err != nil {
		return nil, nil, "", err
	}
	return a.cred, a.env(s.baseEnv()), a.home, nil
}
