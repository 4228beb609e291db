package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// restoreRelay is python run in a sandbox's kernel: a thread, saved with
// the kernel's memory, that waits for the channel directory to be open
// (a restore reopens it) and for the agent to listen there again, then
// moves the agent's socket aside, listens at its name and forwards every
// connection to the agent, both ways. It marks what it achieves in files
// under /home/user: relay-conns (a connection passed through it),
// relay-saw-plain (it read a request in clear), relay-forged (it changed
// an answer: REALVALUE becomes FORGEDVAL). The host sees it in place by
// the agent's socket moved aside (agent.sock.real): it writes no file
// there, which would keep the directory from being sealed again. It acts
// only on a socket the agent bound after it started (the restore's): the
// checkpoint's release may open the directory while the agent's first
// socket is still there, and a relay placed then is undone by the
// restored agent's bind, so the attack would not take place.
const restoreRelay = `
import os, socket, threading, time
P = %q
D = os.path.dirname(P)
def mark(name):
    with open('/home/user/' + name, 'a') as f:
        f.write('.')
def pump(src, dst, up):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            if up and b'secret-plaintext' in b:
                mark('relay-saw-plain')
            if not up and b'REALVALUE' in b:
                b = b.replace(b'REALVALUE', b'FORGEDVAL')
                mark('relay-forged')
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def ident():
    try:
        st = os.stat(P)
        return (st.st_ino, st.st_ctime_ns)
    except OSError:
        return None
FIRST = ident()
def relay():
    while True:
        time.sleep(0.002)
        if ident() == FIRST:
            continue  # the agent's socket from before the checkpoint: wait for the restore's
        if not os.access(D, os.W_OK):
            continue  # sealed
        try:
            probe = socket.socket(socket.AF_UNIX)
            probe.connect(P)  # the agent listens again
            probe.close()
            os.rename(P, P + '.real')
        except OSError:
            continue
        break
    ln = socket.socket(socket.AF_UNIX)
    ln.bind(P)
    os.chmod(P, 0o666)
    ln.listen(64)
    while True:
        h, _ = ln.accept()
        mark('relay-conns')
        a = socket.socket(socket.AF_UNIX)
        a.connect(P + '.real')
        threading.Thread(target=pump, args=(h, a, True), daemon=True).start()
        threading.Thread(target=pump, args=(a, h, False), daemon=True).start()
threading.Thread(target=relay, name='relay', daemon=True).start()
`

// TestRealRestoreRelay attacks a restore with memory on runsc: code saved
// with the kernel takes the reopened channel (moves the agent's fresh
// socket aside, binds a relay at its name that forwards to it). The test
// holds the daemon until the relay is in place (restoreHook), so the
// relay always wins its race: both proofs of the handshake pass through
// it and the directory seals with the relay's socket in it. From then on
// every message of the sandbox's channel passes through user code, which
// must read none of them and change none: a result the relay rewrote
// would come back FORGEDVAL. It failed before sessions of a reopened
// channel were sealed: the relay read the request and forged the result.
func TestRealRestoreRelay(t *testing.T) {
	p := newProviderWith(t, Config{Runtime: "runsc", Prestart: []string{agent.Python}})
	if !p.Capabilities().Has(contexts.CapMemory) {
		t.Fatal("runsc cannot keep memory here (a tmpfs state dir?)")
	}
	c := create(t, p, contexts.Spec{})
	id := c.ID()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := strings.Replace(restoreRelay, "%q", "'"+agent.SocketDir+"/"+agent.SocketName+"'", 1)
	if r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: code}, nil); err != nil || !r.Success {
		t.Fatalf("relay setup: %+v %v", r, err)
	}
	if err := p.Checkpoint(ctx, id); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(p.rt.StateDir(), "chan", id)
	p.restoreHook = func(string) {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			_, moved := os.Stat(filepath.Join(dir, agent.SocketName+".real"))
			st, bound := os.Lstat(filepath.Join(dir, agent.SocketName))
			if moved == nil && bound == nil && st.Mode()&os.ModeSocket != 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Error("the relay did not take the channel within 2 minutes")
	}
	sb, err := p.Restore(ctx, id)
	if err != nil {
		t.Fatalf("restore with the relay in place: %v", err)
	}
	defer sb.Close()
	rc := sb.(*Sandbox).Client
	r, err := rc.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: `print("REALVALUE"); "secret-plaintext"`}, nil)
	if err == nil && strings.Contains(r.Stdout, "FORGEDVAL") {
		t.Errorf("the relay forged the result: stdout %q", r.Stdout)
	}
	if err != nil || !r.Success || strings.TrimSpace(r.Stdout) != "REALVALUE" {
		t.Fatalf("run through the relay: %+v %v", r, err)
	}
	r, err = rc.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: `tuple(os.path.exists('/home/user/' + n) for n in ('relay-conns', 'relay-saw-plain', 'relay-forged'))`}, nil)
	if err != nil || !r.Success {
		t.Fatalf("the relay's marks: %+v %v", r, err)
	}
	got := mainResult(r)
	t.Logf("(relayed, read in clear, forged) = %s", got)
	if !strings.HasPrefix(got, "(True,") {
		t.Fatalf("no connection passed through the relay (%s): the attack did not take place", got)
	}
	if got != "(True, False, False)" {
		t.Fatalf("the relay read or changed the channel's messages: (relayed, read in clear, forged) = %s", got)
	}
}
