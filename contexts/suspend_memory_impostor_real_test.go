package contexts_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
)

// restoreImpostor is python run in a context's kernel: a thread that, in a
// tight loop, takes the agent's channel path (removing whatever is there,
// as the agent itself does) and, once bound, answers every connection with
// a forged result and garbage; when its socket loses the name (the agent
// bound again) it takes it back. The thread lives in the kernel's process,
// so it is saved with the sandbox's memory and runs again the moment the
// sandbox is restored, racing the released agent for the reopened channel
// directory. Before the restore the directory is sealed and every try
// fails. It counts its binds and connections in files under /home/user.
const restoreImpostor = `
import os, socket, threading
open('/home/user/kept.txt', 'w').write('kept')
x = 41
def _mark(name):
    try:
        with open('/home/user/' + name, 'a') as f:
            f.write('.')
    except OSError:
        pass
def _serve(s):
    while True:
        try:
            c, _ = s.accept()
        except OSError:
            return
        _mark('impostor-hits')
        try:
            c.sendall(b'{"jsonrpc":"2.0","id":1,"result":{"stdout":"IMPOSTOR","results":[{"text":"IMPOSTOR","main":true}]}}\n' + os.urandom(256))
        except OSError:
            pass
        c.close()
def _impostor(path):
    mine = None
    while True:
        if mine is not None:
            try:
                if os.stat(path).st_ino == mine[1]:
                    continue
            except OSError:
                pass
            mine[0].close()
            mine = None
        try:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            s = socket.socket(socket.AF_UNIX)
            try:
                s.bind(path)
                s.listen(64)
                mine = (s, os.stat(path).st_ino)
            except OSError:
                s.close()
                continue
            threading.Thread(target=_serve, args=(s,), daemon=True).start()
            _mark('impostor-bound')
        except OSError:
            pass
threading.Thread(target=_impostor, args=(%q,), name='impostor', daemon=True).start()
`

// TestRealSuspendRestoreImpostor attacks the window a wake with memory
// opens (runsc): the host reopens the sandbox's channel directory so that
// the restored agent can listen again, and code saved with the sandbox
// races it for the socket's name. Whoever wins, the daemon must not take
// the impostor for the agent: either the agent was authenticated first
// (the wake says Restored, x + 1 is 42) or the daemon met the impostor,
// refused it on the key's handshake and fell back to the suspend's image
// (Woken, a new sandbox, the file kept, x gone; or it authenticated the
// agent but could not seal the directory the impostor had changed, and
// fell back the same way). No result is the
// impostor's, and the wake neither hangs nor fails.
func TestRealSuspendRestoreImpostor(t *testing.T) {
	e := newSuspendEnvOn(t, "runsc")
	// The manager's log says why a wake fell back.
	var logs testenv.Buffer
	e.log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.start()
	a := ident("t1", "impostor", "main")
	code := strings.Replace(restoreImpostor, "%q", "'"+agent.SocketDir+"/"+agent.SocketName+"'", 1)
	res := e.exec(a, code)
	if !res.Success {
		t.Fatalf("setup: %+v", res)
	}
	cid, sid := res.ContextID, res.SandboxID
	// The impostor is running: it has tried the sealed directory already.
	res = e.exec(a, "import threading; [th for th in threading.enumerate() if th.name == 'impostor'] != []")
	if mainResult(res) != "True" {
		t.Fatalf("the impostor thread is not running: %+v", res)
	}
	rec, err := e.m.Suspend(e.ctx, "t1", cid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.KeepsMemory() {
		t.Fatalf("suspend kept no memory: %+v", rec)
	}

	res = e.exec(a, "x + 1")
	if strings.Contains(mainResult(res)+res.Stdout+res.Stderr, "IMPOSTOR") {
		t.Fatalf("a result came from the impostor: %+v", res)
	}
	switch {
	case res.Restored:
		// The agent was authenticated before the impostor held the name.
		t.Logf("the agent won the race: restored on %s", res.SandboxID)
		if mainResult(res) != "42" || res.SandboxID != sid || res.Woken {
			t.Fatalf("restored: x + 1 = %q on %s, woken %v (%+v); want 42 on %s", mainResult(res), res.SandboxID, res.Woken, res.Error, sid)
		}
		r := e.exec(a, "(open('/home/user/kept.txt').read(), len(open('/home/user/impostor-hits').read()) if os.path.exists('/home/user/impostor-hits') else 0)")
		t.Logf("after the restore: (file, connections the impostor took) = %s", mainResult(r))
		if !strings.HasPrefix(mainResult(r), "('kept', ") || strings.Contains(mainResult(r), "IMPOSTOR") {
			t.Fatalf("after the restore: %+v", r)
		}
	case res.Woken:
		// The daemon met the impostor, refused it, and woke the context
		// from the suspend's image: files kept, kernels fresh.
		t.Logf("the impostor won the race: woken on %s without memory", res.SandboxID)
		if res.SandboxID == sid {
			t.Fatalf("woken on the sandbox the impostor held (%s)", sid)
		}
		if res.Success || res.Error == nil || res.Error.Name != "NameError" {
			t.Fatalf("x + 1 after the fallback: %q (%+v); want NameError: the kernel is fresh", mainResult(res), res.Error)
		}
		// It fell back because the daemon refused the channel, not for
		// another reason: either the handshake refused the impostor, or
		// the agent proved its key but the impostor had removed the
		// agent's socket while in use, so the directory could not be
		// sealed again (runtime/oci Seal).
		l := logs.String()
		refused := strings.Contains(l, agent.ErrAuth.Error()) || strings.Contains(l, "seal channel")
		if !strings.Contains(l, "wake without memory") || !refused {
			t.Fatalf("the fallback was not the channel's refusal; logs:\n%s", l)
		}
		t.Logf("refused by the handshake %v, by the seal %v", strings.Contains(l, agent.ErrAuth.Error()), strings.Contains(l, "seal channel"))
		if e.running(sid) {
			t.Fatal("the sandbox whose restore met the impostor is still there")
		}
		r := e.exec(a, "open('/home/user/kept.txt').read()")
		if mainResult(r) != "'kept'" || r.Woken || r.Restored {
			t.Fatalf("the file after the fallback: %+v", r)
		}
	default:
		t.Fatalf("the wake said neither Restored nor Woken: %+v", res)
	}
	got, err := e.m.Get(e.ctx, "t1", cid)
	if err != nil || got.Suspended() || got.SuspendImage != "" {
		t.Fatalf("woken record: %+v, %v", got, err)
	}
}
