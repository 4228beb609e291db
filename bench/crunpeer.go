package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// crunPeer is the peer's bundle, ready for runs of it (sample).
type crunPeer struct {
	crun, dir, state, bundle string
	runs                     int
}

// newCrunPeer writes the peer's bundle in a directory of its own, which
// close removes.
func newCrunPeer() (*crunPeer, error) {
	crun, err := exec.LookPath("crun")
	if err != nil {
		return nil, errors.New("crun not installed")
	}
	dir, err := os.MkdirTemp("", "sandlot-crun-peer-")
	if err != nil {
		return nil, err
	}
	p := &crunPeer{crun: crun, dir: dir, state: filepath.Join(dir, "state"), bundle: filepath.Join(dir, "bundle")}
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
	took, err := crunFirstResult(ctx, p.crun, p.state, p.bundle, fmt.Sprintf("sandlot-peer-%d-%d", os.Getpid(), p.runs))
	if err != nil {
		return 0, fmt.Errorf("crun peer: %w", err)
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

// crunFirstResult runs the peer bundle as container id and times it from
// the start of crun to python's line "2" on its stdout; crun's teardown
// after that is not timed, as the cold figures do not time theirs.
func crunFirstResult(ctx context.Context, crun, state, bundle, id string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, crun, "--root", state, "run", "--bundle", bundle, id)
	// Pipes, never the host's /dev/null: the runtime hands the container's
	// stdio to the container's root.
	var errb bytes.Buffer
	cmd.Stdin, cmd.Stderr = strings.NewReader(""), &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := oci.StartCrun(cmd); err != nil {
		return 0, err
	}
	line, rerr := bufio.NewReader(stdout).ReadString('\n')
	took := time.Since(t0)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("crun run: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	if rerr != nil || line != "2\n" {
		return 0, fmt.Errorf("crun run: python printed %q (%v), want 2", line, rerr)
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
