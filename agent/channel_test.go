package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent/podtls"
	"github.com/sandlot/sandlot/errdefs"
)

// podAgent is the agent's side of the pod channel on a loopback port: each
// connection goes through PodKeys.Accept, and what Accept said is sent on
// results. Enrollments are kept in enrolled.
type podAgent struct {
	addr     string
	keys     *PodKeys
	results  chan error
	mu       sync.Mutex
	enrolled []Enrollment
}

func startPodAgent(t *testing.T, key, pool []byte) *podAgent {
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
	a := &podAgent{addr: ln.Addr().String(), keys: keys, results: make(chan error, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _, err := keys.Accept(wrap(c), func(e Enrollment) error {
					a.mu.Lock()
					a.enrolled = append(a.enrolled, e)
					a.mu.Unlock()
					return nil
				})
				a.results <- err
			}()
		}
	}()
	return a
}

// result is what the agent said of its next connection.
func (a *podAgent) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-a.results:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the agent never finished a connection")
		return nil
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var (
	sandboxKey = bytes.Repeat([]byte{1}, KeySize)
	poolKey    = bytes.Repeat([]byte{2}, KeySize)
	otherKey   = bytes.Repeat([]byte{3}, KeySize)
)

// TestPodChannelKeys: only a peer that proves the key the agent holds now
// gets served; a pool agent serves nobody until its one enrollment, and
// then only the sandbox key it was given.
func TestPodChannelKeys(t *testing.T) {
	tests := []struct {
		name     string
		key      []byte // the agent's sandbox key (cold pod)
		pool     []byte // the agent's pool key (warm pod)
		enroll   [][]byte
		enrollOK []bool
		dial     []byte // then a connection with this key
		dialOK   bool
	}{
		{name: "cold: the sandbox key", key: sandboxKey, dial: sandboxKey, dialOK: true},
		{name: "cold: a peer without the key", key: sandboxKey, dial: otherKey},
		{name: "cold: no enrollment", key: sandboxKey, enroll: [][]byte{sandboxKey}, enrollOK: []bool{false}, dial: sandboxKey, dialOK: true},
		{name: "pool: nothing served before enrollment", pool: poolKey, dial: poolKey},
		{name: "pool: enrolled, the sandbox key", pool: poolKey, enroll: [][]byte{poolKey}, enrollOK: []bool{true}, dial: sandboxKey, dialOK: true},
		{name: "pool: enrolled, the pool key opens nothing", pool: poolKey, enroll: [][]byte{poolKey}, enrollOK: []bool{true}, dial: poolKey},
		{name: "pool: a second enrollment", pool: poolKey, enroll: [][]byte{poolKey, poolKey}, enrollOK: []bool{true, false}, dial: sandboxKey, dialOK: true},
		{name: "pool: the wrong pool key", pool: poolKey, enroll: [][]byte{otherKey, poolKey}, enrollOK: []bool{false, true}, dial: sandboxKey, dialOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			a := startPodAgent(t, tc.key, tc.pool)
			took := false
			for i, k := range tc.enroll {
				// An enrollment after one that succeeded brings another
				// key: were it taken, the first key would stop working.
				e := Enrollment{Key: sandboxKey}
				if took {
					e.Key = otherKey
				}
				took = took || tc.enrollOK[i]
				err := Enroll(ctx, podDial(a.addr), k, e)
				if (err == nil) != tc.enrollOK[i] {
					t.Fatalf("enrollment %d: %v, want ok %v", i, err, tc.enrollOK[i])
				}
				if aerr := a.result(t); (aerr == nil) != tc.enrollOK[i] {
					t.Fatalf("agent on enrollment %d: %v, want ok %v", i, aerr, tc.enrollOK[i])
				}
			}
			c, err := OpenPod(ctx, podDial(a.addr), ClientConfig{SandboxID: "s", Key: tc.dial})
			if err == nil {
				c.Close()
			}
			if (err == nil) != tc.dialOK {
				t.Fatalf("dial: %v, want ok %v", err, tc.dialOK)
			}
			if err != nil && !errors.Is(err, errdefs.ErrPermissionDenied) && !errors.Is(err, errdefs.ErrUnavailable) {
				t.Errorf("dial error %v is neither denied nor unavailable", err)
			}
			if aerr := a.result(t); (aerr == nil) != tc.dialOK || (aerr != nil && !errors.Is(aerr, ErrAuth)) {
				t.Errorf("agent: %v, want ok %v (or ErrAuth)", aerr, tc.dialOK)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			want := 0
			for _, ok := range tc.enrollOK {
				if ok {
					want++
				}
			}
			if len(a.enrolled) != want {
				t.Errorf("%d enrollments applied, want %d", len(a.enrolled), want)
			}
			if want == 1 && !bytes.Equal(a.enrolled[0].Key, sandboxKey) {
				t.Errorf("the applied enrollment has key %x", a.enrolled[0].Key)
			}
		})
	}
}

// TestPodChannelRaceEnroll: two peers that both hold the pool key enroll
// at once; exactly one succeeds.
func TestPodChannelRaceEnroll(t *testing.T) {
	ctx := testCtx(t)
	a := startPodAgent(t, nil, poolKey)
	errs := make(chan error, 2)
	for _, k := range [][]byte{sandboxKey, otherKey} {
		go func() { errs <- Enroll(ctx, podDial(a.addr), poolKey, Enrollment{Key: k}) }()
	}
	ok := 0
	for range 2 {
		if <-errs == nil {
			ok++
		}
		a.result(t)
	}
	if ok != 1 {
		t.Fatalf("%d enrollments succeeded, want 1", ok)
	}
}

// recorder keeps what the host writes, the plaintext inside TLS that an
// attacker is assumed to have obtained (a log, an earlier relay).
type recorder struct {
	net.Conn
	mu    sync.Mutex
	wrote [][]byte
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.wrote = append(r.wrote, bytes.Clone(p))
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// TestPodChannelReplay: the host's messages of one good handshake, sent
// again on a new connection, prove nothing (the agent's nonce and the TLS
// session are fresh).
func TestPodChannelReplay(t *testing.T) {
	ctx := testCtx(t)
	a := startPodAgent(t, sandboxKey, nil)
	c, err := podDial(a.addr)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	binding, err := channelBinding(c)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Conn: c}
	if err := hostHandshake(ctx, rec, sandboxKey, podProofs(binding)); err != nil {
		t.Fatalf("the recorded handshake: %v", err)
	}
	c.Close()
	if err := a.result(t); err != nil {
		t.Fatalf("agent on the recorded handshake: %v", err)
	}
	if len(rec.wrote) != 2 {
		t.Fatalf("recorded %d host messages, want 2 (hello, proof)", len(rec.wrote))
	}

	r, err := podDial(a.addr)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetDeadline(time.Now().Add(10 * time.Second))
	r.Write(rec.wrote[0])
	io.ReadFull(r, make([]byte, len(handshakeMagic)+nonceSize+macSize))
	r.Write(rec.wrote[1])
	var ok [1]byte
	if _, err := io.ReadFull(r, ok[:]); err == nil && ok[0] == handshakeOK {
		t.Fatal("the agent accepted a replayed handshake")
	}
	if err := a.result(t); !errors.Is(err, ErrAuth) {
		t.Fatalf("agent on the replay: %v, want ErrAuth", err)
	}
}

// TestPodChannelRelay: a man in the middle that terminates TLS on both
// sides (its own certificate towards the host, a client of its own
// towards the agent) and relays the handshake's bytes gets nowhere: the
// proofs cover each TLS session's exported keys, and its two sessions
// differ. Neither side accepts, and an enrollment through it fails too.
func TestPodChannelRelay(t *testing.T) {
	for _, enroll := range []bool{false, true} {
		name := "dial"
		if enroll {
			name = "enroll"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			var a *podAgent
			if enroll {
				a = startPodAgent(t, nil, poolKey)
			} else {
				a = startPodAgent(t, sandboxKey, nil)
			}
			mitm := startRelay(t, a.addr)
			var err error
			if enroll {
				err = Enroll(ctx, podDial(mitm), poolKey, Enrollment{Key: sandboxKey})
			} else {
				var c *Client
				if c, err = OpenPod(ctx, podDial(mitm), ClientConfig{SandboxID: "s", Key: sandboxKey}); err == nil {
					c.Close()
				}
			}
			if err == nil {
				t.Fatal("the host accepted a relayed handshake")
			}
			if !errors.Is(err, ErrAuth) {
				t.Errorf("host: %v, want ErrAuth", err)
			}
			if aerr := a.result(t); aerr == nil {
				t.Fatal("the agent accepted a relayed handshake")
			}
			if enroll && a.keys.Enrolled() {
				t.Fatal("the agent was enrolled through the relay")
			}
		})
	}
}

// startRelay is the man in the middle: a TLS server with a certificate of
// its own that dials the agent and copies plaintext both ways.
func startRelay(t *testing.T, agentAddr string) string {
	t.Helper()
	wrap, err := podtls.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				h := wrap(raw)
				defer h.Close()
				ag, err := podtls.Dial(context.Background(), agentAddr)
				if err != nil {
					return
				}
				defer ag.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(ag, h); done <- struct{}{} }()
				go func() { io.Copy(h, ag); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPodChannelEmptyKey: before its enrollment a pool agent has no
// sandbox key; a peer that proves "no key" (an HMAC with an empty key,
// which anyone can compute) is not served.
func TestPodChannelEmptyKey(t *testing.T) {
	ctx := testCtx(t)
	a := startPodAgent(t, nil, poolKey)
	c, err := podDial(a.addr)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	binding, err := channelBinding(c)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	nonceH := make([]byte, nonceSize)
	c.Write(append([]byte(podMagic), nonceH...))
	reply := make([]byte, len(handshakeMagic)+nonceSize+macSize)
	if _, err := io.ReadFull(c, reply); err == nil {
		nonceA := reply[len(handshakeMagic) : len(handshakeMagic)+nonceSize]
		c.Write(handshakeMAC(nil, "host", nonceA, nonceH, binding))
		var ok [1]byte
		if _, err := io.ReadFull(c, ok[:]); err == nil && ok[0] == handshakeOK {
			t.Fatal("an unenrolled agent accepted a proof made with no key")
		}
	}
	if err := a.result(t); !errors.Is(err, ErrAuth) {
		t.Fatalf("agent: %v, want ErrAuth", err)
	}
}

// TestPodChannelWrongPoolKey: a peer without the pool key that goes on
// regardless of the agent's proof (it sends a proof made with its own key,
// then an enrollment) enrolls nothing.
func TestPodChannelWrongPoolKey(t *testing.T) {
	ctx := testCtx(t)
	a := startPodAgent(t, nil, poolKey)
	c, err := podDial(a.addr)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	binding, err := channelBinding(c)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	nonceH := bytes.Repeat([]byte{9}, nonceSize)
	c.Write(append([]byte(enrollMagic), nonceH...))
	reply := make([]byte, len(handshakeMagic)+nonceSize+macSize)
	if _, err := io.ReadFull(c, reply); err != nil {
		t.Fatal(err)
	}
	nonceA := reply[len(handshakeMagic) : len(handshakeMagic)+nonceSize]
	pr := enrollProofs(binding)
	c.Write(handshakeMAC(otherKey, pr.host, nonceA, nonceH, binding))
	msg := []byte(`{"key":"` + "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=" + `"}`)
	c.Write(append([]byte{0, 0, 0, byte(len(msg))}, msg...))
	io.Copy(io.Discard, c)
	if err := a.result(t); !errors.Is(err, ErrAuth) {
		t.Errorf("agent: %v, want ErrAuth", err)
	}
	if a.keys.Enrolled() {
		t.Fatal("a peer without the pool key enrolled the agent")
	}
}
