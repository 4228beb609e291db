// Package oci runs sandboxes with an OCI runtime binary: crun (preferred),
// runc, or runsc (gVisor). It writes one bundle per sandbox (config.json
// from the runtime-spec types) over a shared read-only root skeleton, and
// keeps every piece of state under one directory so a fresh process can
// list, inspect and delete the sandboxes an earlier one created.
//
// Layout under Config.StateDir:
//
//	bundles/<id>/     config.json, runtime (which binary made it), pid, secret, log
//	ids/<n>           which sandbox holds host id range n (idmap.go)
//	chan/<id>/        runsc: the sandbox's channel tmpfs (channel.go)
//	<kind>/           the runtime binary's own state (--root)
//
// The root skeleton (mount points, /usr links, /etc), the image roots
// (imgroot.go) and the null devices given as stdio (null.go) live in the
// host's share (share.go), outside the state dir.
//
// Containers are started detached, in their own session, with /dev/null as
// stdio: nothing ties them to the process that created them.
package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// Runtime kinds.
const (
	KindAuto  = "auto"
	KindCrun  = "crun"
	KindRunc  = "runc"
	KindRunsc = "runsc"
)

// autoOrder is the preference of auto, fastest first (measured: crun
// cold-starts in about half runc's time). runsc is only used when named.
var autoOrder = []string{KindCrun, KindRunc}

// DefaultStateDir holds sandlot's runtime state. It lives on /run so a
// reboot, which kills every sandbox, also forgets them.
const DefaultStateDir = "/run/sandlot"

// Config configures a Runtime.
type Config struct {
	// Runtime is auto (""), crun, runc or runsc.
	Runtime string
	// StateDir is the root of all state; "" means DefaultStateDir.
	StateDir string
	// Binary overrides the path of the runtime binary (default: $PATH).
	Binary string
	// IDBase is the first host uid/gid of the sandboxes' id ranges
	// (IDRangeSize each); 0: DefaultIDBase. Ranges that overlap a host
	// account (/etc/passwd, group, subuid, subgid) are skipped.
	IDBase uint32
	// IDRanges is how many ranges there are, the most sandboxes that can
	// exist at once; 0: DefaultIDRanges.
	IDRanges int
	// ShareDir is where the host's share is mounted; "": DefaultShareDir.
	ShareDir string
	// Logger receives the runtime choice and cleanup problems; nil discards.
	Logger *slog.Logger
}

// Runtime is an OCI runtime driver. It implements runtime.Runtime.
type Runtime struct {
	kind     string
	bin      string
	stateDir string
	// stateTmpfs: the state dir is in memory (CanCheckpoint).
	stateTmpfs bool
	rootfs     string
	// imageSkel is the top layer of every image root (imgroot.go).
	imageSkel string
	log       *slog.Logger
	ids       *idAllocator
	share     string
	// seccompBPF is the default profile compiled by crun once (base64),
	// passed to later containers so crun skips libseccomp; "" otherwise.
	seccompBPF string
	// info caches what Dial needs of a bundle (id -> *sandboxInfo); a
	// bundle does not change after create.
	info sync.Map
	// ready holds the read end of each new sandbox's readiness pipe
	// (ready.go) until DialWait takes it (id -> *os.File).
	ready sync.Map
}

var _ runtime.Runtime = (*Runtime)(nil)

// New prepares the state directory and the root skeleton and selects the
// runtime. With auto it probes crun then runc by creating (not starting) a
// throwaway container and keeps the first that works; a successful probe
// is remembered in the state dir. A named runtime that is not installed
// fails with errdefs.ErrFailedPrecondition.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kind := cfg.Runtime
	if kind == "" {
		kind = KindAuto
	}
	// Which binaries to try, checked before the state dir is touched.
	var kinds []string
	switch kind {
	case KindCrun, KindRunc, KindRunsc:
		kinds = []string{kind}
	case KindAuto:
		kinds = autoOrder
	default:
		return nil, fmt.Errorf("unknown runtime %q (auto, crun, runc, runsc): %w", kind, errdefs.ErrInvalidArgument)
	}
	bins := map[string]string{}
	var errs []error
	for _, k := range kinds {
		bin := cfg.Binary
		if bin == "" || kind == KindAuto {
			var err error
			if bin, err = exec.LookPath(k); err != nil {
				err = fmt.Errorf("runtime %s not installed (no %q in PATH; install it or use --runtime auto): %w", k, k, errdefs.ErrFailedPrecondition)
				if kind != KindAuto {
					return nil, err
				}
				log.Info("runtime unusable", logkey.Runtime, k, logkey.Err, err)
				errs = append(errs, err)
				continue
			}
		}
		bins[k] = bin
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("no working OCI runtime (%w): %w", errors.Join(errs...), errdefs.ErrFailedPrecondition)
	}

	dir := cfg.StateDir
	if dir == "" {
		dir = DefaultStateDir
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, "bundles")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
	}
	// The sandboxes' root users (host ids of their own) reach the runsc
	// channel directories through here: search, no listing.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	share := cfg.ShareDir
	if share == "" {
		share = DefaultShareDir
	}
	if err := mountShare(share); err != nil {
		return nil, err
	}
	ids, err := newIDAllocator(dir, filepath.Join(share, idsDir), cfg.IDBase, cfg.IDRanges)
	if err != nil {
		return nil, err
	}
	conflicts, err := ids.rebuild(bundleConfigs(dir))
	if err != nil {
		return nil, fmt.Errorf("id ranges: %w", err)
	}
	for id, c := range conflicts {
		log.Warn("sandbox's host id range is held by another state dir's sandbox or file; delete one of the two", logkey.Sandbox, id, "id_base", c.Base, logkey.Path, dir)
	}
	// The allocation of an older version, per state dir: the bundles
	// carried it over above.
	os.RemoveAll(filepath.Join(dir, "ids"))
	skel, err := newSkeleton("/")
	if err != nil {
		return nil, err
	}
	rootfs, err := skel.materialize(filepath.Join(share, "rootfs"))
	if err != nil {
		return nil, err
	}
	imageSkel, err := newImageSkeleton().materialize(filepath.Join(share, "rootfs"))
	if err != nil {
		return nil, err
	}
	if err := prepareRoots(share); err != nil {
		return nil, err
	}
	if err := prepareNull(share); err != nil {
		return nil, err
	}
	for _, k := range kinds {
		bin, ok := bins[k]
		if !ok {
			continue
		}
		r := &Runtime{kind: k, bin: bin, stateDir: dir, stateTmpfs: onTmpfs(dir), rootfs: rootfs, imageSkel: imageSkel, share: share, ids: ids, log: log}
		if kind != KindAuto && k != KindCrun {
			return r, nil
		}
		start := time.Now()
		err := r.probeCached(ctx)
		if err == nil {
			if kind == KindAuto {
				log.Info("runtime selected", logkey.Runtime, k, "binary", r.bin, "probe", time.Since(start))
			}
			return r, nil
		}
		if kind != KindAuto {
			return nil, fmt.Errorf("runtime %s: %w", k, err)
		}
		log.Info("runtime unusable", logkey.Runtime, k, logkey.Err, err)
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no working OCI runtime (%w): %w", errors.Join(errs...), errdefs.ErrFailedPrecondition)
}

// launcher is process-wide: one namespaced thread starts every crun
// (mountns.go): on a hybrid cgroup host crun needs its namespace, and on
// every host crun runs there from a read-only bind of its binary.
var launcher nsLauncher

// Name implements runtime.Runtime.
func (r *Runtime) Name() string { return r.kind }

// StateDir is the directory that holds all of this runtime's state.
func (r *Runtime) StateDir() string { return r.stateDir }

// Rootfs is the shared root skeleton in use.
func (r *Runtime) Rootfs() string { return r.rootfs }

// HeldIDRanges is how many host id ranges this state dir holds (leak
// checks).
func (r *Runtime) HeldIDRanges() (int, error) { return r.ids.held() }

// ShareDir is the host's share (share.go), for files that sandboxes
// bind-mount read-only (Spec.Mounts sources): their paths there reveal
// nothing of the host. Name what goes there by its content.
func (r *Runtime) ShareDir() string { return r.share }

// Create implements runtime.Runtime.
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) error {
	if err := runtime.CheckID(spec.ID); err != nil {
		return err
	}
	return r.create(ctx, r.bundle(spec.ID), spec, "run", "")
}

// create makes sandbox spec.ID's bundle in dir and runs the runtime's sub
// on it: run (a sandbox), create (a probe), or restore (a fork from the
// checkpoint in image: fork.go).
func (r *Runtime) create(ctx context.Context, dir string, spec runtime.Spec, sub, image string) (err error) {
	if err := checkNetwork(spec.Network); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("bundle: %w", err)
	}
	d := r.driver("")
	ph := phases{start: time.Now()}
	var ids IDRange
	allocated := false
	defer func() {
		if err == nil {
			r.log.Debug("sandbox started", append([]any{logkey.Sandbox, spec.ID}, ph.attrs()...)...)
		}
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if derr := r.deleteBundle(cctx, d, spec.ID, dir); derr != nil {
				// A process of the sandbox may still run as its ids: the
				// range stays held until a delete succeeds.
				r.log.Warn("cleanup after failed create", logkey.Sandbox, spec.ID, logkey.Err, derr)
			} else if allocated {
				// deleteBundle freed it too once config.json was written.
				r.ids.free(spec.ID, ids)
			}
		}
	}()
	ids, err = r.ids.alloc(spec.ID)
	if err != nil {
		return err
	}
	allocated = true
	ph.mark("ids")
	var chanDir string
	if r.kind == KindRunsc && (sub == "run" || sub == "restore") {
		if chanDir, err = r.mountChannel(spec.ID, ids); err != nil {
			return err
		}
	}
	if err := r.checkVolumes(spec); err != nil {
		return err
	}
	rootfs := r.rootfs
	if spec.Root != nil {
		if rootfs, err = r.mountImageRoot(spec.ID, spec.Root, ids, spec.Limits.WithDefaults().DiskBytes, &ph); err != nil {
			return err
		}
		if err := r.saveRootInfo(dir, spec.Root, spec.Limits.WithDefaults().DiskBytes); err != nil {
			return err
		}
		if err := attachVolumes(rootfs, spec.Volumes, ids); err != nil {
			return err
		}
	}
	if spec.Root != nil {
		d.need = rootfs
	}
	sp, err := buildSpec(spec, rootfs, r.kind, r.seccompBPF, ids, chanDir)
	if err != nil {
		return err
	}
	if err := r.applyNetwork(sp, &d, rootfs, spec.Network); err != nil {
		return err
	}
	idFiles, err := r.identity(sp)
	if err != nil {
		return err
	}
	b, err := json.Marshal(sp)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
	}
	if err != nil {
		for _, f := range idFiles { // deleteBundle finds them in config.json only
			_ = os.Remove(f)
		}
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "runtime"), []byte(r.kind+"\n"), 0o600); err != nil {
		return err
	}
	if dir == r.bundle(spec.ID) {
		r.cacheInfo(spec.ID, sp)
	}
	args := []string{sub, "--bundle", dir, "--pid-file", filepath.Join(dir, "pid")}
	if sub == "run" || sub == "restore" {
		args = append(args, "--detach")
	}
	if sub == "restore" {
		if err := r.prepareForkRestore(&d, spec.ID, dir, image, sp, ids); err != nil {
			return err
		}
		args = append(args, "--image-path", image)
	}
	var files []*os.File
	var readyR *os.File // the readiness pipe's read end (ready.go)
	if spec.Secret != nil && sub == "restore" {
		// The restored agent holds the source's key; the fork's is
		// for the host's rekey (fork.go), never handed in.
		if err := os.WriteFile(filepath.Join(dir, "secret"), spec.Secret, 0o600); err != nil {
			return err
		}
	} else if spec.Secret != nil {
		if err := os.WriteFile(filepath.Join(dir, "secret"), spec.Secret, 0o600); err != nil {
			return err
		}
		pr, err := secretPipe(spec.Secret)
		if err != nil {
			return err
		}
		defer pr.Close()
		files = append(files, pr)
		if r.kind == KindRunsc {
			args = append(args, "--pass-fd", "3:3")
		} else if spec.Ready && sub == "run" {
			rr, rw, perr := os.Pipe()
			if perr != nil {
				return perr
			}
			// The daemon's write end closes once the runtime has exited
			// (it held a copy only to hand to the init); from then on
			// only the init holds one.
			defer rw.Close()
			readyR = rr
			files = append(files, rw)
			args = append(args, "--preserve-fds", "2")
		} else {
			args = append(args, "--preserve-fds", "1")
		}
	}
	ph.mark("bundle")
	if err := d.detached(ctx, spec.ID, filepath.Join(dir, "log"), files, append(args, spec.ID)...); err != nil {
		if readyR != nil {
			readyR.Close()
		}
		return fmt.Errorf("create sandbox %s: %w", spec.ID, err)
	}
	if readyR != nil {
		r.ready.Store(spec.ID, readyR)
	}
	ph.mark(d.kind + "_" + sub)
	return nil
}

// Kill implements runtime.Runtime.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	if _, err := os.Stat(r.bundle(id)); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	_, err := r.driverFor(id).output(ctx, "kill", id, strconv.Itoa(int(sig)))
	return err
}

// Delete implements runtime.Runtime.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	dir := r.bundle(id)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return removeEmptyCgroups(teardown.CgroupDirs(id))
	}
	return r.deleteBundle(ctx, r.driverFor(id), id, dir)
}

// runtimeState is the part of `<runtime> state` we use.
type runtimeState struct {
	Status  string    `json:"status"`
	PID     int       `json:"pid"`
	Created time.Time `json:"created"`
}

// State implements runtime.Runtime.
func (r *Runtime) State(ctx context.Context, id string) (*runtime.State, error) {
	if err := runtime.CheckID(id); err != nil {
		return nil, err
	}
	dir := r.bundle(id)
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	st := &runtime.State{ID: id, Status: runtime.StatusStopped, Labels: map[string]string{}}
	if ids, err := readIDRange(filepath.Join(dir, "config.json")); err == nil {
		st.IDBase = ids.Base
	}
	var sp struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(cfg, &sp) == nil {
		for k, v := range sp.Annotations {
			if l, ok := strings.CutPrefix(k, labelPrefix); ok {
				st.Labels[l] = v
			}
		}
	}
	out, err := r.driverFor(id).output(ctx, "state", id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return st, nil // bundle without container: it died or never started
	}
	if err != nil {
		return nil, err
	}
	var rs runtimeState
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("sandbox %s state: %w", id, err)
	}
	st.Created = rs.Created
	switch rs.Status {
	case "running":
		st.Status, st.PID = runtime.StatusRunning, rs.PID
	case "paused", "pausing":
		st.Status, st.PID = runtime.StatusPaused, rs.PID
	case "created", "creating":
		st.Status, st.PID = runtime.StatusCreated, rs.PID
	}
	if st.Status != runtime.StatusStopped && pidGone(rs.PID) {
		// The runtime reads a killed init as it was until it is reaped;
		// everything asked of it fails from the kill on (channel.go's gone).
		st.Status = runtime.StatusStopped
	}
	return st, nil
}

// List implements runtime.Runtime.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(r.stateDir, "bundles"))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.IsDir() && runtime.ValidID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Stats implements runtime.Runtime.
func (r *Runtime) Stats(ctx context.Context, id string) (*runtime.Stats, error) {
	if err := runtime.CheckID(id); err != nil {
		return nil, err
	}
	if _, err := os.Stat(r.bundle(id)); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return readStats(id)
}
