package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/runtime/oci"
)

// crunPeerUID is the host uid the peer container's root maps to: nobody,
// so the peer runs unprivileged on the host as the sandboxes do.
const crunPeerUID = 65534

const crunPeerName = "peer: crun run to python's 1+1 (all namespaces, host /usr, no agent): the floor of a cold first result"

// CrunPythonPeer measures `crun run` of a container whose only process is
// `python3 -c 'print(1+1)'`, to its output, started as sandlot starts crun
// (oci.StartCrun): the host's /usr read-only, fresh
// user, pid, network, ipc, uts, mount and cgroup namespaces, no agent and no
// seccomp filter. It is the floor of a cold create to a first python result
// for any sandbox that crun starts and CPython answers in, on this host:
// what sandlot adds (its agent, the handshake, the kernel's protocol) comes
// on top.
func CrunPythonPeer(ctx context.Context, n int) ([]Figure, error) {
	p, err := newCrunPeer()
	if err != nil {
		return nil, err
	}
	defer p.close()
	const warm = 2
	var samples []time.Duration
	for i := 0; i < warm+n; i++ {
		took, err := p.sample(ctx)
		if err != nil {
			return nil, err
		}
		if i >= warm {
			samples = append(samples, took)
		}
	}
	return []Figure{crunPeerFigure(samples)}, nil
}

// crunPeer is the peer's bundle, ready for runs of it (sample) by one
// OCI runtime: crun (newCrunPeer) or gVisor's runsc (newRunscPeer).
type crunPeer struct {
	name     string   // the runtime's name, for errors
	bin      string   // its binary
	global   []string // its global flags, before the state dir's
	dir      string
	state    string
	bundle   string
	runs     int
	launched func(*exec.Cmd) error // starts the runtime's command
}

// newCrunPeer writes the crun peer's bundle in a directory of its own,
// which close removes; crun is started as sandlot starts it
// (oci.StartCrun).
func newCrunPeer() (*crunPeer, error) {
	return newPeer("crun", nil, oci.StartCrun)
}

// newRunscPeer is the peer run by gVisor's runsc with the global flags
// sandlot gives it (oci.RunscFlags: systrap, no network, no overlay, the
// config's seccomp profile), started as sandlot starts runsc: a session of
// its own. It is the floor of a cold first result under runsc.
func newRunscPeer() (*crunPeer, error) {
	return newPeer("runsc", oci.RunscFlags(), func(c *exec.Cmd) error {
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		return c.Start()
	})
}

func newPeer(name string, global []string, launched func(*exec.Cmd) error) (*crunPeer, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s not installed", name)
	}
	dir, err := os.MkdirTemp("", "sandlot-"+name+"-peer-")
	if err != nil {
		return nil, err
	}
	p := &crunPeer{name: name, bin: bin, global: global, dir: dir, state: filepath.Join(dir, "state"),
		bundle: filepath.Join(dir, "bundle"), launched: launched}
	// The container's root is nobody on the host: it must reach its rootfs.
	if err := os.Chmod(dir, 0o755); err != nil {
		p.close()
		return nil, err
	}
	if err := writePeerBundle(p.bundle, []string{HostPython, "-c", "print(1+1)"}); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// sample times one run of the peer (crunFirstResult).
func (p *crunPeer) sample(ctx context.Context) (time.Duration, error) {
	p.runs++
	took, err := p.firstResult(ctx, fmt.Sprintf("sandlot-peer-%d-%d", os.Getpid(), p.runs))
	if err != nil {
		return 0, fmt.Errorf("%s peer: %w", p.name, err)
	}
	return took, nil
}

func (p *crunPeer) close() { os.RemoveAll(p.dir) }

// crunPeerFigure is crun's row. The cold create's ratio to it is read
// from the two rows of one run: a repeated run takes it from the cold
// create's run.
func crunPeerFigure(samples []time.Duration) Figure {
	f := Latency(crunPeerName, samples)
	f.follows = coldFirstName
	return f
}

// firstResult runs the peer bundle as container id and times it from
// the start of the runtime to python's line "2" on its stdout; the
// runtime's teardown after that is not timed, as the cold figures do not
// time theirs.
func (p *crunPeer) firstResult(ctx context.Context, id string) (time.Duration, error) {
	args := append(append([]string{"--root", p.state}, p.global...), "run", "--bundle", p.bundle, id)
	cmd := exec.CommandContext(ctx, p.bin, args...)
	// Pipes, never the host's /dev/null: the runtime hands the container's
	// stdio to the container's root.
	var errb bytes.Buffer
	cmd.Stdin, cmd.Stderr = strings.NewReader(""), &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := p.launched(cmd); err != nil {
		return 0, err
	}
	line, rerr := bufio.NewReader(stdout).ReadString('\n')
	took := time.Since(t0)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("%s run: %v: %s", p.name, err, strings.TrimSpace(errb.String()))
	}
	if rerr != nil || line != "2\n" {
		return 0, fmt.Errorf("%s run: python printed %q (%v), want 2", p.name, line, rerr)
	}
	return took, nil
}

// writePeerBundle writes an OCI bundle at dir whose rootfs has the host's
// /usr read-only and nothing else of the host, and whose process is args.
func writePeerBundle(dir string, args []string) error {
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"proc", "dev", "usr", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if _, err := os.Stat(filepath.Join("/usr", l)); err == nil {
			if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
				return err
			}
		}
	}
	ns := func(types ...specs.LinuxNamespaceType) []specs.LinuxNamespace {
		out := make([]specs.LinuxNamespace, len(types))
		for i, t := range types {
			out[i] = specs.LinuxNamespace{Type: t}
		}
		return out
	}
	ids := []specs.LinuxIDMapping{{ContainerID: 0, HostID: crunPeerUID, Size: 1}}
	spec := specs.Spec{
		Version: oci.SpecVersion,
		Process: &specs.Process{
			Args: args, Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}, Cwd: "/tmp",
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: "peer",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755", "size=64k"}},
			{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "size=1m"}},
		},
		Linux: &specs.Linux{
			Namespaces: ns(specs.PIDNamespace, specs.NetworkNamespace, specs.IPCNamespace, specs.UTSNamespace,
				specs.MountNamespace, specs.CgroupNamespace, specs.UserNamespace),
			UIDMappings: ids,
			GIDMappings: ids,
			MaskedPaths: []string{"/proc/kcore", "/proc/keys", "/proc/timer_list"},
		},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
}
