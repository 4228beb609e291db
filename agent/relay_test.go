package agent_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/server"
	"github.com/sandlot/sandlot/errdefs"
)

// relay is what code in a sandbox can do while its channel directory is
// open (a restore with memory, docs/security-walls-sandbox.md): move the agent's fresh
// socket aside, listen at its name, and forward every connection to the
// agent's socket, both ways. It keeps what the host sent, and passes what
// the agent answers after the handshake through tamper (the nth answer);
// a tamper that returns nil makes the relay drop that answer and close
// both ends cleanly, at a frame's (and a record's) boundary.
type relay struct {
	ln     net.Listener
	tamper func(b []byte, n int) []byte
	mu     sync.Mutex
	seen   bytes.Buffer // host to agent
}

// handshakeReply is what the agent sends during the handshake: its magic,
// nonce and proof, then its verdict.
const handshakeReply = 4 + 32 + 32 + 1

// startRelay moves the agent's socket at path aside and listens there.
func startRelay(t *testing.T, path string, r *relay) *relay {
	t.Helper()
	real := path + ".real"
	if err := os.Rename(path, real); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	r.ln = ln
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			h, err := ln.Accept()
			if err != nil {
				return
			}
			a, err := net.Dial("unix", real)
			if err != nil {
				h.Close()
				continue
			}
			go func() { // host to agent: kept
				buf := make([]byte, 64<<10)
				for {
					n, err := h.Read(buf)
					if n > 0 {
						r.mu.Lock()
						r.seen.Write(buf[:n])
						r.mu.Unlock()
						a.Write(buf[:n])
					}
					if err != nil {
						a.Close()
						return
					}
				}
			}()
			go func() { // agent to host: tampered with once past the handshake
				buf := make([]byte, 64<<10)
				total, answers := 0, 0
				for {
					n, err := a.Read(buf)
					if n > 0 {
						b := buf[:n]
						if skip := handshakeReply - total; skip < n && r.tamper != nil {
							skip = max(skip, 0)
							answers++
							t := r.tamper(bytes.Clone(b[skip:]), answers)
							if t == nil {
								h.Write(b[:skip])
								h.Close()
								a.Close()
								return
							}
							b = append(append([]byte(nil), b[:skip]...), t...)
						}
						total += n
						h.Write(b)
					}
					if err != nil {
						h.Close()
						return
					}
				}
			}()
		}
	}()
	return r
}

// answerID finds the id of an answer in clear.
var answerID = regexp.MustCompile(`^\{"jsonrpc":"2.0","id":([0-9]+),"result"`)

func (r *relay) sawPlain(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.seen.Bytes(), []byte(s))
}

// startKeyedAgent runs an agent in this process on a unix socket with key.
func startKeyedAgent(t testing.TB, key []byte) (socket, home string) {
	t.Helper()
	dir := t.TempDir()
	socket, home = filepath.Join(dir, "run", "agent.sock"), filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		server.Run(ctx, server.Config{Socket: socket, Key: key, Home: home})
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return socket, home
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not listen")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRelay: a relay between the host and the agent (the attack a
// reopened channel allows) passes both proofs of the handshake. On a
// sealed session (ClientConfig.Sealed) it must learn nothing of what the
// host sends, and nothing it changes may reach a caller as the agent's
// answer: the call fails instead (unavailable), so the relay can only
// drop. The plain subtests are the control: on a plain session the same
// relay reads the request and its forgery is taken, so the sealed cases'
// passing is the sealed layer's doing, not a harness that sees nothing.
func TestRelay(t *testing.T) {
	key := bytes.Repeat([]byte{9}, agent.KeySize)
	tests := []struct {
		name   string
		tamper func(b []byte, n int) []byte
		// changes: the relay changes bytes (else it forwards them, or
		// finds nothing to change in a sealed stream).
		changes bool
		// plain: also run on a plain session, where the relay must read
		// the request and, if forged, its forgery must be taken: the
		// control that shows the harness sees and changes the stream.
		plain, forged bool
	}{
		{name: "forwards", tamper: func(b []byte, _ int) []byte { return b }, plain: true},
		{name: "forges in place", tamper: func(b []byte, _ int) []byte {
			return bytes.ReplaceAll(b, []byte("REALVALUE"), []byte("FORGEDVAL"))
		}, plain: true, forged: true},
		{name: "answers in the agent's place", tamper: func(b []byte, n int) []byte {
			id := strconv.Itoa(n)
			if m := answerID.FindSubmatch(b); m != nil {
				id = string(m[1])
			}
			return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"name":"FORGEDVAL","path":"/FORGEDVAL"}}` + "\n")
		}, changes: true, plain: true, forged: true},
		{name: "flips a bit", tamper: func(b []byte, _ int) []byte {
			b[len(b)-1] ^= 1
			return b
		}, changes: true},
		{name: "replays an answer", tamper: func() func(b []byte, n int) []byte {
			var first []byte
			return func(b []byte, n int) []byte {
				if n == 1 {
					first = bytes.Clone(b)
					return b
				}
				return first
			}
		}(), changes: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socket, home := startKeyedAgent(t, key)
			r := startRelay(t, socket, &relay{tamper: tc.tamper})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := agent.Dial(ctx, socket, agent.ClientConfig{SandboxID: "relayed", Key: key, Sealed: true})
			if err != nil {
				t.Fatalf("dial through the relay: %v", err)
			}
			defer c.Close()
			for i := range 3 {
				path := filepath.Join(home, "secret-plaintext-REALVALUE"+strconv.Itoa(i))
				fi, err := c.Mkdir(ctx, path)
				if r.sawPlain("secret-plaintext") {
					t.Fatal("the relay read the host's request in clear")
				}
				if fi != nil && fi.Path != path {
					t.Fatalf("call %d took the relay's answer: %+v", i, fi)
				}
				if err != nil {
					if ctx.Err() != nil || !errors.Is(err, errdefs.ErrUnavailable) {
						t.Fatalf("call %d: %v, want unavailable", i, err)
					}
					if !tc.changes {
						t.Fatalf("a relay that changed nothing broke call %d: %v", i, err)
					}
					t.Logf("call %d refused the tampered session: %v", i, err)
					return
				}
			}
			if tc.changes {
				t.Fatal("three calls succeeded on a session the relay tampered with")
			}
		})
		if !tc.plain {
			continue
		}
		t.Run("plain/"+tc.name, func(t *testing.T) {
			socket, home := startKeyedAgent(t, key)
			r := startRelay(t, socket, &relay{tamper: tc.tamper})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := agent.Dial(ctx, socket, agent.ClientConfig{SandboxID: "relayed", Key: key})
			if err != nil {
				t.Fatalf("dial through the relay: %v", err)
			}
			defer c.Close()
			path := filepath.Join(home, "secret-plaintext-REALVALUE")
			fi, err := c.Mkdir(ctx, path)
			if err != nil {
				t.Fatalf("a plain call through the relay: %v", err)
			}
			if !r.sawPlain("secret-plaintext") {
				t.Fatal("the relay did not see a plain session's request: the harness reads nothing")
			}
			if forged := !strings.Contains(fi.Path, "REALVALUE"); forged != tc.forged {
				t.Fatalf("the call took %+v: forged %v, want %v", fi, forged, tc.forged)
			}
		})
	}
}

// TestRelayDropsProbeAnswer: a relay that drops the agent's answer to the
// in-band ping (agent.WithProbe) and then closes the connection cleanly
// makes the loss look as if it came before the agent read the request,
// though the agent read and ran it. On a sealed session (the only kind a
// relay can sit in) the call must fail unavailable, never ErrNotSent, or
// the caller would run the code again elsewhere. The plain session shows
// the harness does what it says: there the drop is taken for "not sent".
func TestRelayDropsProbeAnswer(t *testing.T) {
	key := bytes.Repeat([]byte{8}, agent.KeySize)
	for _, sealed := range []bool{true, false} {
		t.Run("sealed="+strconv.FormatBool(sealed), func(t *testing.T) {
			socket, home := startKeyedAgent(t, key)
			startRelay(t, socket, &relay{tamper: func([]byte, int) []byte { return nil }})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := agent.Dial(ctx, socket, agent.ClientConfig{SandboxID: "relayed", Key: key, Sealed: sealed})
			if err != nil {
				t.Fatalf("dial through the relay: %v", err)
			}
			defer c.Close()
			path := filepath.Join(home, "ran")
			_, err = c.Mkdir(agent.WithProbe(ctx), path)
			if err == nil || ctx.Err() != nil || !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("call through a relay that dropped the answers: %v, want unavailable", err)
			}
			// The agent got the request and ran it.
			for {
				if _, serr := os.Stat(path); serr == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("the agent never ran the request")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if got := errors.Is(err, agent.ErrNotSent); got != !sealed {
				t.Fatalf("sealed %v: ErrNotSent = %v (%v)", sealed, got, err)
			}
			t.Logf("sealed %v: %v", sealed, err)
		})
	}
}

// TestSealedLargeFrames: frames far larger than one record (split on
// write, joined on read) cross a sealed session both ways intact.
func TestSealedLargeFrames(t *testing.T) {
	key := bytes.Repeat([]byte{5}, agent.KeySize)
	socket, home := startKeyedAgent(t, key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := agent.Dial(ctx, socket, agent.ClientConfig{SandboxID: "sealed", Key: key, Sealed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, 2<<20+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(home, "big")
	if _, err := c.WriteFile(ctx, agent.WriteParams{Path: path, Data: data}); err != nil {
		t.Fatal(err)
	}
	r, err := c.ReadFile(ctx, agent.ReadParams{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	// A read answers at most its own limit (1 MiB): sixteen records.
	if r.Size != int64(len(data)) || len(r.Data) < 1<<20 || !bytes.Equal(r.Data, data[:len(r.Data)]) {
		t.Fatalf("read back %d bytes of %d, not the %d written", len(r.Data), r.Size, len(data))
	}
}

// BenchmarkChannel: the protocol's round trip (ping) to an agent with a
// key on a plain and on a sealed session to the same agent, called in turn
// so both see the same machine load: the sealed layer's cost per call.
// plain-us and sealed-us are the medians.
func BenchmarkChannel(b *testing.B) {
	key := bytes.Repeat([]byte{5}, agent.KeySize)
	socket, _ := startKeyedAgent(b, key)
	ctx := context.Background()
	var cs [2]*agent.Client
	for i := range cs {
		c, err := agent.Dial(ctx, socket, agent.ClientConfig{SandboxID: "bench", Key: key, Sealed: i == 1})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	var ds [2][]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			k := (i + j) % 2
			start := time.Now()
			if err := cs[k].Ping(ctx); err != nil {
				b.Fatal(err)
			}
			ds[k] = append(ds[k], time.Since(start))
		}
	}
	b.StopTimer()
	for k, name := range []string{"plain-us", "sealed-us"} {
		slices.Sort(ds[k])
		b.ReportMetric(float64(ds[k][len(ds[k])/2].Nanoseconds())/1e3, name)
	}
}
