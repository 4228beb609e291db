package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime/oci"
)

// The tests in this file attack the walls between a sandbox and the host
// (and other sandboxes) from inside, as a hostile tenant would, on every
// runtime. See docs/security-walls-sandbox.md for what each wall is meant to stop.

// restarted is a fresh Provider on p's state dir: the daemon after a restart.
func restarted(t *testing.T, p *Provider) *Provider {
	t.Helper()
	p2, err := New(Config{Runtime: p.Runtime().Name(), StateDir: p.stateDir, AgentPath: testenv.AgentBinary(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p2
}

// hostListener listens on a unix socket in a host directory. Its count
// accepts and counts the connections queued so far: a connect returns only
// once its connection is queued, so none is missed.
func hostListener(t *testing.T) (path string, count func() int) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sl-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	path = filepath.Join(dir, "host.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o777)
	t.Cleanup(func() { l.Close() })
	n := 0
	return path, func() int {
		for {
			l.(*net.UnixListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
			c, err := l.Accept()
			if err != nil {
				return n
			}
			c.Close()
			n++
		}
	}
}

// TestSymlinkPlant: tenant A replaces the agent socket it can reach with a
// symlink to a host socket or to tenant B's agent, and the daemon restarts.
// The restarted daemon must not connect to the planted peer: the host
// socket sees no connection, and A's client never reaches B's files.
func TestSymlinkPlant(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testSymlinkPlant(t, kind) })
	}
}

func testSymlinkPlant(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{})
	ctx := context.Background()
	a := create(t, p, contexts.Spec{})
	b := create(t, p, contexts.Spec{})
	if r := sh(t, a, "echo tenant-a > ~/whoami"); r.ExitCode != 0 {
		t.Fatalf("marker a: %+v", r)
	}
	if r := sh(t, b, "echo tenant-b > ~/whoami"); r.ExitCode != 0 {
		t.Fatalf("marker b: %+v", r)
	}
	hostSock, accepted := hostListener(t)
	st, err := p.Runtime().State(ctx, b.ID())
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{
		"host socket":       hostSock,
		"B's host socket":   filepath.Join(p.stateDir, "sandboxes", b.ID(), agent.SocketName),
		"B through /proc":   fmt.Sprintf("/proc/%d/root%s/%s", st.PID, agent.SocketDir, agent.SocketName),
		"B's runsc channel": filepath.Join(p.stateDir, "chan", b.ID(), agent.SocketName),
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			// Whatever A can reach of its channel, it replaces with a link.
			plant := fmt.Sprintf("cd %s && ln -sfn %s planted && mv -fT planted %s", agent.SocketDir, target, agent.SocketName)
			planted := sh(t, a, plant).ExitCode == 0
			t.Logf("plant succeeded: %v", planted)
			p2 := restarted(t, p)
			sb, err := p2.Attach(ctx, a.ID())
			if n := accepted(); n != 0 {
				t.Fatalf("the restarted daemon connected to the planted host socket (%d connections)", n)
			}
			if err != nil {
				if !planted {
					t.Fatalf("attach A after a plant that failed: %v", err)
				}
				return // refused: the daemon would not talk to the planted peer
			}
			defer sb.Close()
			r, err := sb.Exec(ctx, agent.ExecParams{Shell: "cat ~/whoami"}, nil)
			if err != nil {
				t.Fatalf("exec through A's client: %v", err)
			}
			if r.Stdout != "tenant-a\n" {
				t.Fatalf("A's client reached %q, want tenant-a", r.Stdout)
			}
		})
	}
}

// impostor is a python program that answers every JSON-RPC request with an
// empty result (enough for ping) and records each connection in /tmp/hit.
// It binds every address the agent might listen on that it can take.
const impostor = `
import json, os, socket, sys, threading
def serve(s):
    while True:
        c, _ = s.accept()
        open('/tmp/hit', 'a').write('x')
        # A forged handshake reply: the magic, a nonce and a MAC it
        # cannot compute without the sandbox's key.
        c.sendall(b'SLA1' + bytes(64))
        def h(c):
            f = c.makefile('rwb')
            for line in f:
                try:
                    req = json.loads(line)
                except Exception:
                    return
                f.write((json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": {}}) + "\n").encode())
                f.flush()
        threading.Thread(target=h, args=(c,), daemon=True).start()
bound = []
for addr in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        if not addr.startswith('@'):
            try:
                os.unlink(addr)
            except OSError:
                pass
            s.bind(addr)
        else:
            s.bind('\0' + addr[1:])
        s.listen()
    except OSError as e:
        print('cannot bind', addr, e, flush=True)
        continue
    bound.append(addr)
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print('bound', bound, flush=True)
threading.Event().wait()
`

// TestImpostor: user code in a sandbox binds its own listener wherever the
// agent listens (or could) and answers like an agent. A restarted daemon
// must reject it; and user code that connects to its own agent must not be
// able to drive it.
func TestImpostor(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testImpostor(t, kind) })
	}
}

func testImpostor(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{})
	ctx := context.Background()
	a := create(t, p, contexts.Spec{})
	addrs := strings.Join([]string{agent.SocketDir + "/" + agent.SocketName, "@sandlot-agent", "@" + agent.SocketDir + "/" + agent.SocketName}, " ")

	t.Run("user code drives its agent", func(t *testing.T) {
		r := sh(t, a, "cat > /tmp/ping.py <<'EOF'\n"+pinger+"\nEOF\npython3 /tmp/ping.py "+addrs)
		if r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != "[]" {
			t.Errorf("the agent answered user code: %s%s", r.Stdout, r.Stderr)
		}
	})

	t.Run("restarted daemon", func(t *testing.T) {
		r := sh(t, a, "cat > /tmp/imp.py <<'EOF'\n"+impostor+"\nEOF\n"+
			"setsid python3 /tmp/imp.py "+addrs+" > /tmp/imp.log 2>&1 < /dev/null & sleep 0.5; cat /tmp/imp.log")
		t.Logf("impostor: %s", r.Stdout)
		sb, err := restarted(t, p).Attach(ctx, a.ID())
		if err == nil {
			defer sb.Close()
			r, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo real"}, nil)
			if err != nil || r.Stdout != "real\n" {
				t.Errorf("attach reached something that is not the agent: %+v, %v", r, err)
			}
		}
		if r := sh(t, a, "cat /tmp/hit 2>/dev/null | wc -c"); strings.TrimSpace(r.Stdout) != "0" {
			t.Errorf("the restarted daemon connected to the impostor (%s connections)", strings.TrimSpace(r.Stdout))
		}
	})

	t.Run("peer without the key", func(t *testing.T) {
		// A peer that passes the runtime's checks but cannot prove the
		// sandbox's key, made here by giving the restarted daemon another
		// key than the agent's: the handshake refuses it.
		b2 := create(t, p, contexts.Spec{})
		secret := filepath.Join(p.stateDir, "bundles", b2.ID(), "secret")
		if err := os.WriteFile(secret, make([]byte, agent.KeySize), 0o600); err != nil {
			t.Fatal(err)
		}
		sb, err := restarted(t, p).Attach(ctx, b2.ID())
		if err == nil {
			sb.Close()
			t.Fatal("attached to an agent that did not prove the key")
		}
		if !errors.Is(err, agent.ErrAuth) || !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("attach: %v, want agent.ErrAuth", err)
		}
	})

	if kind != "runsc" {
		return // crun, runc: no process but the init can hold the name (runtime/oci TestChannelPeer)
	}
	t.Run("unsealed channel", func(t *testing.T) {
		// As if the host had not sealed the channel directory: the
		// impostor takes the socket's place, and gVisor's own processes,
		// which the host sees as the listener, pass the runtime's peer
		// check. Only the handshake is left to refuse it.
		dir := filepath.Join(p.stateDir, "chan", a.ID())
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			t.Fatal(err)
		}
		r := sh(t, a, "rm -f /tmp/hit; setsid python3 /tmp/imp.py "+agent.SocketDir+"/"+agent.SocketName+" > /tmp/imp2.log 2>&1 < /dev/null & sleep 0.5; cat /tmp/imp2.log")
		if !strings.Contains(r.Stdout, "bound ['") {
			t.Fatalf("impostor did not bind: %s", r.Stdout)
		}
		sb, err := restarted(t, p).Attach(ctx, a.ID())
		if err == nil {
			sb.Close()
			t.Fatal("the restarted daemon accepted the impostor")
		}
		if !errors.Is(err, errdefs.ErrPermissionDenied) || !errors.Is(err, agent.ErrAuth) {
			t.Errorf("attach: %v, want the handshake to refuse the peer", err)
		}
		if r := sh(t, a, "cat /tmp/hit 2>/dev/null | wc -c"); strings.TrimSpace(r.Stdout) == "0" {
			t.Errorf("the impostor saw no connection: the test did not reach the handshake")
		}
	})
}

// pinger sends a ping on each address and prints those that answered.
const pinger = `
import socket, sys
ok = []
for addr in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(('\0' + addr[1:]) if addr.startswith('@') else addr)
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        if b'"result"' in s.makefile('rb').readline():
            ok.append(addr)
    except OSError:
        pass
print(ok)
`

// TestHostUIDs: the processes of two concurrent sandboxes run, as seen from
// the host, under host uids and gids that differ between the sandboxes,
// lie in high ranges and belong to no host account.
func TestHostUIDs(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testHostUIDs(t, kind) })
	}
}

func testHostUIDs(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{})
	accounts := hostAccounts(t)
	ids := map[string]map[string]bool{} // sandbox -> "uid:N"/"gid:N" seen
	for range 2 {
		c := create(t, p, contexts.Spec{})
		// A user process beside the agent.
		if r := sh(t, c, "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo ok"); r.ExitCode != 0 {
			t.Fatalf("sleep: %+v", r)
		}
		seen := map[string]bool{}
		for _, pid := range cgroupPIDs(t, c.ID()) {
			uids, gids := procIDs(pid)
			for _, u := range uids {
				seen["uid:"+u] = true
			}
			for _, g := range gids {
				seen["gid:"+g] = true
			}
		}
		if len(seen) == 0 {
			t.Fatalf("no process of %s found on the host", c.ID())
		}
		ids[c.ID()] = seen
		rng, err := p.rt.IDRange(c.ID())
		if err != nil {
			t.Fatal(err)
		}
		if rng.Base < oci.DefaultIDBase || rng.Size != oci.IDRangeSize {
			t.Errorf("sandbox %s has range %+v, want %d ids from %d up", c.ID(), rng, oci.IDRangeSize, oci.DefaultIDBase)
		}
		for k := range seen {
			typ, v, _ := strings.Cut(k, ":")
			n, _ := strconv.ParseUint(v, 10, 32)
			if accounts[k] {
				t.Errorf("sandbox %s runs as host %s %s, a host account", c.ID(), typ, v)
			}
			if !rng.Contains(uint32(n)) {
				t.Errorf("sandbox %s runs as host %s %d, outside its range %+v", c.ID(), typ, n, rng)
			}
		}
		t.Logf("sandbox %s (range %d+%d): %v", c.ID(), rng.Base, rng.Size, seen)
	}
	var sets []map[string]bool
	for _, s := range ids {
		sets = append(sets, s)
	}
	for k := range sets[0] {
		if sets[1][k] {
			t.Errorf("both sandboxes run as host %s", k)
		}
	}
}

// hostAccounts are the uids and gids of /etc/passwd and /etc/group, as
// "uid:N" and "gid:N".
func hostAccounts(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range []struct{ path, kind string }{{"/etc/passwd", "uid"}, {"/etc/group", "gid"}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if fs := strings.Split(l, ":"); len(fs) > 3 {
				out[f.kind+":"+fs[2]] = true
				if f.kind == "uid" {
					out["gid:"+fs[3]] = true
				}
			}
		}
	}
	return out
}

// cgroupPIDs lists the host pids in a sandbox's pids cgroup.
func cgroupPIDs(t *testing.T, id string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids/sandlot", id, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// procIDs returns the real, effective, saved and fs uids and gids of a
// host process.
func procIDs(pid string) (uids, gids []string) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			uids = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "Gid:"); ok {
			gids = strings.Fields(v)
		}
	}
	return uids, gids
}

// TestHostDisk: everything a sandbox can write is its own size-limited,
// nosuid, nodev storage. From inside, every writable mount is filled and
// gets a setuid file; from the host, nothing of it landed on a disk, and
// any file that reached a host mount sits on a small nosuid tmpfs.
func TestHostDisk(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testHostDisk(t, kind) })
	}
}

func testHostDisk(t *testing.T, kind string) {
	const disk = 16 << 20
	p := newProvider(t, kind, contexts.Limits{DiskBytes: disk})
	c := create(t, p, contexts.Spec{})
	// Every rw mount but the kernel's own file systems.
	list := sh(t, c, `awk '$6 ~ /(^|,)rw(,|$)/ && $5 !~ /^\/(proc|sys)(\/|$)/ {print $5}' /proc/self/mountinfo`)
	mounts := strings.Fields(list.Stdout)
	if len(mounts) == 0 {
		t.Fatalf("no writable mounts found: %+v", list)
	}
	for _, m := range mounts {
		t.Run(m, func(t *testing.T) {
			if m == "/dev/pts" || m == "/dev/mqueue" {
				return // no regular files
			}
			// Device nodes bind-mounted from the host (/dev/null, ...) are
			// not storage.
			r := sh(t, c, fmt.Sprintf(`[ -d %[1]s ] || { echo readonly; exit 0; }
cd %[1]s || exit 0
if ! touch .wall-suid 2>/dev/null; then echo readonly; exit 0; fi
cp /bin/true .wall-suid && chmod 4755 .wall-suid
dd if=/dev/zero of=.wall-fill bs=1M count=%[2]d 2>&1
df -k --output=fstype,size . 2>/dev/null | tail -1; grep " %[1]s " /proc/self/mountinfo`, m, disk>>20+80))
			t.Logf("%s: %s", m, r.Stdout)
			if strings.HasPrefix(r.Stdout, "readonly") {
				return
			}
			var opts string
			for _, l := range strings.Split(r.Stdout, "\n") {
				if fs := strings.Fields(l); len(fs) > 5 && fs[4] == m {
					opts = fs[5]
					if i := strings.Index(l, " - "); i > 0 {
						opts += " " + l[i:]
					}
				}
			}
			// gVisor's tmpfs lives in the sentry, which gives no access to
			// host devices whatever the flags; it does not report nodev.
			if !strings.Contains(opts, "nosuid") || (m != "/dev" && kind != "runsc" && !strings.Contains(opts, "nodev")) {
				t.Errorf("%s is writable without nosuid,nodev: %s", m, opts)
			}
			if !strings.Contains(opts, " - tmpfs ") {
				t.Errorf("%s is writable and not the sandbox's own tmpfs: %s", m, opts)
			}
			if !strings.Contains(r.Stdout, "No space left") && !strings.Contains(r.Stdout, "Disk quota") {
				t.Errorf("filling %s did not hit a size limit: %s", m, r.Stdout)
			}
		})
	}
	// From the host: the sandbox's files must not be on a host disk, and
	// a host mount it could reach must be a small nosuid tmpfs.
	filepath.WalkDir(p.stateDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), ".wall-") {
			return nil
		}
		var sfs unix.Statfs_t
		if err := unix.Statfs(filepath.Dir(path), &sfs); err != nil {
			t.Errorf("statfs %s: %v", path, err)
			return nil
		}
		tmpfs, size, nosuid := sfs.Type == unix.TMPFS_MAGIC, int64(sfs.Blocks)*sfs.Bsize, sfs.Flags&unix.ST_NOSUID != 0
		if !tmpfs || size > 1<<20 || !nosuid {
			t.Errorf("sandbox file %s reached a host file system (tmpfs %v, size %d, nosuid %v)", path, tmpfs, size, nosuid)
		}
		return nil
	})
}

// TestNoHostNames: /proc/self/cgroup and the mount table inside a sandbox
// name neither the sandbox nor the host's paths (state dir, cgroup parent).
func TestNoHostNames(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testNoHostNames(t, kind) })
	}
}

func testNoHostNames(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{})
	c := create(t, p, contexts.Spec{})
	r := sh(t, c, "cat /proc/self/cgroup /proc/self/mountinfo /proc/1/cgroup /proc/1/mountinfo /proc/self/mounts")
	if r.ExitCode != 0 {
		t.Fatalf("read: %+v", r)
	}
	for _, bad := range []string{c.ID(), p.stateDir, filepath.Base(p.stateDir), "sandboxes/"} {
		for _, l := range strings.Split(r.Stdout, "\n") {
			if strings.Contains(l, bad) {
				t.Errorf("%q shows inside the sandbox: %s", bad, l)
			}
		}
	}
	// Every cgroup line ("id:controllers:path") has the namespace's root.
	for _, f := range []string{"/proc/self/cgroup", "/proc/1/cgroup"} {
		r := sh(t, c, "cat "+f)
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			if parts := strings.SplitN(l, ":", 3); len(parts) != 3 || parts[2] != "/" {
				t.Errorf("%s inside the sandbox: %q", f, l)
			}
		}
	}
}
