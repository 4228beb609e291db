// Package runtime declares what sandlot needs from a container runtime: start
// an isolated sandbox from a Spec, find it again by id (also from a fresh
// process, after a daemon restart), stop it, and remove every trace of it.
//
// The implementation is runtime/oci (crun, runc, runsc). Providers
// (provider/local) consume this interface; they never talk to an OCI runtime
// binary themselves.
package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// Runtime runs sandboxes. Methods are safe for concurrent use.
type Runtime interface {
	// Name is the runtime in use ("crun", "runc", "runsc").
	Name() string
	// Create creates and starts a sandbox. It returns once the sandbox's
	// process runs; it does not wait for anything inside to be ready. An id
	// that already exists fails with errdefs.ErrAlreadyExists. On failure
	// nothing is left behind.
	Create(ctx context.Context, spec Spec) error
	// Kill sends sig to the sandbox's init process.
	Kill(ctx context.Context, id string, sig syscall.Signal) error
	// Pause freezes every process of a running sandbox (the cgroup
	// freezer, through the runtime's own pause): they keep their memory
	// and stop using CPU until Resume. Pausing a paused sandbox fails
	// with errdefs.ErrFailedPrecondition, an unknown one with ErrNotFound.
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused sandbox; a sandbox that is not paused fails
	// with errdefs.ErrFailedPrecondition.
	Resume(ctx context.Context, id string) error
	// Delete stops the sandbox if it runs and removes its processes,
	// mounts, cgroups and bundle. Deleting an unknown id is not an error.
	Delete(ctx context.Context, id string) error
	// State reports the sandbox's status (errdefs.ErrNotFound if unknown).
	State(ctx context.Context, id string) (*State, error)
	// List returns the ids of every sandbox this runtime's state directory
	// holds, running or not, including those created by an earlier process.
	List(ctx context.Context) ([]string, error)
	// Stats samples the sandbox's resource usage from its cgroups.
	Stats(ctx context.Context, id string) (*Stats, error)
	// Channel is the unix socket address (a path, or "@name" for an
	// abstract name) on which a sandbox's init listens for the host; it is
	// the same for every sandbox of this runtime.
	Channel() string
	// Dial connects to the channel of sandbox id, from any process and at
	// any time (also after a daemon restart). It never follows anything the
	// sandbox could have planted (symlinks, renamed sockets) and checks that
	// the listening peer belongs to that sandbox; it fails with
	// errdefs.ErrUnavailable while nothing listens yet and
	// errdefs.ErrNotFound when the sandbox is gone.
	Dial(ctx context.Context, id string) (net.Conn, error)
	// Seal makes sandbox id's channel unchangeable from inside (where the
	// runtime's channel has anything the sandbox could change). The host
	// calls it once it has authenticated the init on a connection, before
	// anything else runs in the sandbox; it is idempotent. A channel that
	// can no longer be sealed fails with errdefs.ErrPermissionDenied.
	Seal(id string) error
	// Secret returns the Spec.Secret sandbox id was created with.
	Secret(id string) ([]byte, error)
}

// Spec describes a sandbox to create.
type Spec struct {
	ID string // see NewID; must match ValidID
	// Args is the init process's argv inside the sandbox (PID 1).
	Args []string
	// Env is added to the default environment (PATH, HOME, LANG, ...).
	Env map[string]string
	// Mounts are extra bind mounts (the agent binary).
	Mounts []Mount
	Limits Limits
	// Labels are kept with the sandbox (bundle annotations) for reconcile.
	Labels map[string]string
	// Secret is handed to the init process alone, as file descriptor 3 (a
	// pipe to read to its end and close), and kept on the host where only
	// root can read it (Runtime.Secret). It never appears in the sandbox's
	// environment, arguments or files. nil: no descriptor 3.
	Secret []byte
	// Ready asks for a readiness pipe: with a Secret, a runtime that can
	// hands the init the write end of a pipe as file descriptor 4, which
	// the init closes once it listens on its channel, and its dial waits
	// on the read end instead of polling. Runtimes that cannot ignore it
	// (runtime/oci: Runtime.ReadyFD).
	Ready bool
	// Network, when set, is the sandbox's network: a namespace the host
	// built (network.Manager) that the sandbox joins instead of a
	// loopback-only one of its own. nil: loopback only.
	Network *Network
	// Root, when set, makes the sandbox's root file system an image: its
	// layers under a writable layer of the sandbox's own. nil: the host
	// template (a generated skeleton with the host's /usr, read-only).
	Root *Root
	// Volumes are mounted into an image Root before the sandbox starts
	// (volume.go); a sandbox without a Root has none.
	Volumes []Volume
	// User is the init's uid and gid inside the sandbox; nil: the sandbox
	// user (1000:1000). uid 0 is root of the sandbox's user namespace and
	// gets RootCaps there (nothing on the host); any other uid gets no
	// capability at all.
	User *User
	// Cwd is the init's working directory; "": the sandbox user's home.
	Cwd string
}

// Root is a sandbox root made of image layers.
type Root struct {
	// Layers are the image's layer trees, top first (image.Image's
	// LowerDirs). They are shared by every sandbox of the image and never
	// written: the sandbox sees them through an id-mapped mount of its own
	// user namespace, so the image's uid 0 is the sandbox's root. Every
	// change goes to a writable layer of the sandbox's own, at most
	// Limits.DiskBytes large, removed with the sandbox.
	Layers []string
	// Upper and Work, when set, are the writable layer instead: empty
	// directories of the caller's on one file system (overlayfs's upper
	// and work dirs), kept when the sandbox is deleted, so a build step's
	// changes can be read back (layer.Diff). Nothing is added to them
	// before the sandbox runs (no home directory), Limits.DiskBytes does
	// not bound them, and what the sandbox writes there is owned by host
	// ids of its range: State.IDBase is its uid and gid 0.
	Upper, Work string
	// Sudo makes the image's sudo work for the sandbox's users, as root
	// of the sandbox: /usr/bin/sudo (a regular file of the image's root)
	// gets back the setuid bit the image store strips, the root is
	// mounted without nosuid, and no_new_privs is left off for the
	// sandbox's processes. It gives nothing a call as root (Spec.User 0)
	// does not: root's capabilities are RootCaps, in the sandbox's user
	// namespace, under the same seccomp filter.
	Sudo bool
}

// User is a uid and gid inside the sandbox.
type User struct{ UID, GID uint32 }

// RootCaps are the capabilities of uid 0 in a sandbox (Spec.User): what
// package managers need to install files owned by other users and to drop
// to their own users (apt's _apt). They apply only inside the sandbox's
// user namespace, to what that namespace owns. Left out on purpose:
// SYS_ADMIN, NET_ADMIN, NET_RAW, SYS_PTRACE, MKNOD, SYS_CHROOT, AUDIT_WRITE.
var RootCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_SETFCAP", "CAP_NET_BIND_SERVICE",
}

// Network is what a sandbox needs to use a network namespace the host
// built for it.
type Network struct {
	// Path is the bind-mounted network namespace to join. It must be the
	// sandbox's alone: crun's and runc's agent channel is an abstract
	// socket, which lives in the network namespace.
	Path string
	// ResolvConf becomes the sandbox's /etc/resolv.conf.
	ResolvConf []byte
	// CACerts (PEM) are added to the sandbox's trust store (the system
	// bundle it sees); nil adds none.
	CACerts []byte
	// Files are small files the sandbox sees read-only, each only when its
	// root has the directory When: a program's drop-in directory, so the
	// file is for that program alone (the ports route's rule for a browser
	// that would resolve the ports domain itself, network/ports). The
	// runtime knows nothing of the programs.
	Files []File
}

// File is a read-only file of a sandbox's network (Network.Files).
type File struct {
	// Path is where the sandbox sees it: absolute and clean.
	Path string
	// When is a directory of the root the file needs ("": always).
	When string
	Data []byte
}

// Mount is a bind mount of a host path into the sandbox.
type Mount struct {
	Source      string // host path
	Destination string // absolute path inside the sandbox
	ReadOnly    bool
}

// Limits bounds one sandbox. Zero fields mean the defaults below.
type Limits struct {
	MemoryBytes int64   // memory, no swap
	PIDs        int64   // processes and threads
	CPUs        float64 // CPU quota in cores
	// DiskBytes bounds what the sandbox can write: each of /home/user and
	// /tmp under the host template, the whole writable layer of an image
	// root.
	DiskBytes int64
}

// Defaults for Limits.
const (
	DefaultMemoryBytes = 2 << 30
	DefaultPIDs        = 256
	DefaultCPUs        = 1.0
	DefaultDiskBytes   = 512 << 20
)

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.PIDs <= 0 {
		l.PIDs = DefaultPIDs
	}
	if l.CPUs <= 0 {
		l.CPUs = DefaultCPUs
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = DefaultDiskBytes
	}
	return l
}

// Status of a sandbox.
type Status string

const (
	StatusCreated Status = "created" // created, init not started
	StatusRunning Status = "running"
	StatusPaused  Status = "paused"  // frozen (Runtime.Pause)
	StatusStopped Status = "stopped" // init exited; Delete cleans up
)

// State is a sandbox's runtime state.
type State struct {
	ID      string
	Status  Status
	PID     int // init's pid on the host; 0 when stopped
	Created time.Time
	Labels  map[string]string
	// IDBase is the host uid and gid that are 0 inside the sandbox (the
	// first of its user namespace's range): files it writes to a
	// Root.Upper are owned by IDBase+n. 0 when the runtime has none.
	IDBase uint32
}

// Stats is a sample of a sandbox's resource usage.
type Stats struct {
	MemoryBytes int64 // cgroup memory usage (includes tmpfs and page cache)
	CacheBytes  int64 // of which page cache (memory.stat: total_cache on v1, file on v2)
	CPUTime     time.Duration
	PIDs        int64
}

// IDPrefix starts every sandbox id.
const IDPrefix = "sb-"

var validID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidID reports whether id is safe to use as a container id and a path
// element.
func ValidID(id string) bool { return validID.MatchString(id) }

// CheckID returns an invalid_argument error for an unusable id.
func CheckID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("sandbox id %q: %w", id, errdefs.ErrInvalidArgument)
	}
	return nil
}

// NewID returns a fresh sandbox id: "sb-" and 12 hex digits.
func NewID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return IDPrefix + hex.EncodeToString(b[:])
}
