package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent/podtls"
	"github.com/sandlot/sandlot/errdefs"
)

// accepted is what PodKeys.Accept said of one connection.
type accepted struct {
	enrolled, serve bool
	err             error
}

// startServingAgent is a pod agent whose Accept results are reported;
// apply fails with applyErr when set.
func startServingAgent(t *testing.T, key, pool []byte, applyErr error) (string, chan accepted) {
	t.Helper()
	keys, err := NewPodKeys(key, pool)
	if err != nil {
		t.Fatal(err)
	}
	wrap, err := podtls.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	results := make(chan accepted, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				enrolled, serve, err := keys.Accept(wrap(c), func(Enrollment) error { return applyErr })
				results <- accepted{enrolled, serve, err}
			}()
		}
	}()
	return ln.Addr().String(), results
}

func next(t *testing.T, results chan accepted) accepted {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the agent never finished a connection")
		return accepted{}
	}
}

// TestEnrollSession: an enrollment that asks to be served on its own
// connection gets a session there only once the agent took its key; a
// peer whose enrollment is refused (the wrong pool key, an agent enrolled
// already, a cold agent, a configuration the agent could not apply) gets
// no session on that connection, and a plain Enroll none either.
func TestEnrollSession(t *testing.T) {
	cfg := ClientConfig{SandboxID: "s", Key: sandboxKey}
	t.Run("served", func(t *testing.T) {
		ctx := testCtx(t)
		addr, results := startServingAgent(t, nil, poolKey, nil)
		c, err := EnrollSession(ctx, podDial(addr), poolKey, Enrollment{Key: sandboxKey}, cfg)
		if err != nil || c == nil {
			t.Fatalf("enroll session: %v, %v", c, err)
		}
		c.Close()
		if r := next(t, results); !r.enrolled || !r.serve || r.err != nil {
			t.Fatalf("agent: %+v, want enrolled and served", r)
		}
		// The key was taken: a new connection proves it, a second
		// enrollment is refused and served nothing.
		d, err := OpenPod(ctx, podDial(addr), cfg)
		if err != nil {
			t.Fatalf("dial with the enrolled key: %v", err)
		}
		d.Close()
		if r := next(t, results); r.enrolled || r.serve || r.err != nil {
			t.Fatalf("agent on the dial: %+v", r)
		}
		if c, err := EnrollSession(ctx, podDial(addr), poolKey, Enrollment{Key: otherKey}, cfg); err == nil || c != nil {
			t.Fatalf("a second enrollment: %v, %v", c, err)
		}
		if r := next(t, results); r.serve || r.err == nil {
			t.Fatalf("agent on a second enrollment: %+v", r)
		}
	})
	for _, tc := range []struct {
		name      string
		key, pool []byte
		prove     []byte
		applyErr  error
		want      error
	}{
		{"the wrong pool key", nil, poolKey, otherKey, nil, errdefs.ErrPermissionDenied},
		{"a cold agent (it hangs up)", sandboxKey, nil, sandboxKey, nil, errdefs.ErrUnavailable},
		{"a configuration not applied", nil, poolKey, poolKey, errors.New("no"), errdefs.ErrFailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			addr, results := startServingAgent(t, tc.key, tc.pool, tc.applyErr)
			c, err := EnrollSession(ctx, podDial(addr), tc.prove, Enrollment{Key: sandboxKey}, cfg)
			if c != nil {
				c.Close()
				t.Fatal("a refused enrollment got a session")
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("enroll session: %v, want %v", err, tc.want)
			}
			if r := next(t, results); r.serve || r.enrolled || r.err == nil {
				t.Fatalf("agent: %+v, want refused", r)
			}
		})
	}
	t.Run("plain enrollment", func(t *testing.T) {
		ctx := testCtx(t)
		addr, results := startServingAgent(t, nil, poolKey, nil)
		if err := Enroll(ctx, podDial(addr), poolKey, Enrollment{Key: sandboxKey, Serve: true}); err != nil {
			t.Fatal(err)
		}
		if r := next(t, results); !r.enrolled || r.serve || r.err != nil {
			t.Fatalf("agent: %+v, want enrolled and the connection done", r)
		}
	})
}

// TestEnrollSessionOldAgent: an agent from before Enrollment.Serve takes
// the enrollment, acknowledges it as a plain one and hangs up:
// EnrollSession reports the enrollment taken and no session, so the host
// dials the sandbox key anew.
func TestEnrollSessionOldAgent(t *testing.T) {
	ctx := testCtx(t)
	wrap, err := podtls.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		tc := wrap(c)
		defer tc.Close()
		binding, err := func() ([]byte, error) {
			if err := tc.Handshake(); err != nil {
				return nil, err
			}
			return channelBinding(tc)
		}()
		if err != nil {
			return
		}
		hello := make([]byte, len(handshakeMagic)+nonceSize)
		if _, err := io.ReadFull(tc, hello); err != nil {
			return
		}
		if agentProve(tc, poolKey, hello[len(handshakeMagic):], enrollProofs(binding)) != nil {
			return
		}
		var n [4]byte
		if _, err := io.ReadFull(tc, n[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(tc, msg); err != nil {
			return
		}
		got <- msg
		tc.Write([]byte{enrollOK})
	}()
	c, err := EnrollSession(ctx, podDial(ln.Addr().String()), poolKey, Enrollment{Key: sandboxKey}, ClientConfig{SandboxID: "s", Key: sandboxKey})
	if err != nil || c != nil {
		t.Fatalf("enroll session with an old agent: %v, %v; want no session and no error", c, err)
	}
	if msg := <-got; !bytes.Contains(msg, []byte(`"serve":true`)) {
		t.Errorf("the enrollment sent %s, without serve", msg)
	}
}
