package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

func TestHandshake(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	other := bytes.Repeat([]byte{8}, KeySize)
	tests := []struct {
		name           string
		hostKey        []byte
		agent          func(net.Conn) error // the peer; nil: AgentHandshake with key
		agentKey       []byte
		hostOK, peerOK bool
		denied         bool // the host's error is permission_denied (never retried)
	}{
		{name: "same key", hostKey: key, agentKey: key, hostOK: true, peerOK: true},
		{name: "agent without the key", hostKey: key, agentKey: other, denied: true},
		{name: "host without the key", hostKey: other, agentKey: key, denied: true},
		{name: "agent hangs up after the proof", hostKey: key, agent: func(c net.Conn) error {
			// A connection that breaks (or a deadline that fires) after the
			// host sent its proof is not a refusal: the caller may retry.
			hello := make([]byte, 36)
			io.ReadFull(c, hello)
			nonceA := make([]byte, nonceSize)
			reply := append([]byte(handshakeMagic), nonceA...)
			reply = append(reply, handshakeMAC(key, "agent", hello[4:], nonceA)...)
			c.Write(reply)
			io.ReadFull(c, make([]byte, macSize))
			return c.Close()
		}},
		{name: "peer speaks JSON-RPC", hostKey: key, denied: true, agent: func(c net.Conn) error {
			io.ReadFull(c, make([]byte, 36))
			_, err := c.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"))
			return err
		}},
		{name: "peer replays an old proof", hostKey: key, denied: true, agent: func(c net.Conn) error {
			// An agent's reply recorded from another connection: valid
			// for that connection's nonce, not for this one.
			io.ReadFull(c, make([]byte, 36))
			old := append([]byte(handshakeMagic), make([]byte, nonceSize)...)
			old = append(old, handshakeMAC(key, "agent", make([]byte, nonceSize), make([]byte, nonceSize))...)
			_, err := c.Write(old)
			return err
		}},
		{name: "peer hangs up", hostKey: key, agent: func(c net.Conn) error { return c.Close() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, a := net.Pipe()
			defer h.Close()
			peer := make(chan error, 1)
			go func() {
				defer a.Close()
				if tc.agent != nil {
					peer <- tc.agent(a)
					io.Copy(io.Discard, a)
					return
				}
				peer <- AgentHandshake(a, tc.agentKey)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := HostHandshake(ctx, h, tc.hostKey)
			if (err == nil) != tc.hostOK {
				t.Errorf("host: %v, want ok %v", err, tc.hostOK)
			}
			if err != nil && !tc.hostOK && !errors.Is(err, ErrAuth) && !errors.Is(err, errdefs.ErrUnavailable) {
				t.Errorf("host error %v is neither auth nor unavailable", err)
			}
			if err != nil && errors.Is(err, errdefs.ErrPermissionDenied) != tc.denied {
				t.Errorf("host error %v: permission denied %v, want %v", err, !tc.denied, tc.denied)
			}
			h.Close()
			perr := <-peer
			if tc.agent == nil && (perr == nil) != tc.peerOK {
				t.Errorf("agent: %v, want ok %v", perr, tc.peerOK)
			}
		})
	}
}

// TestHandshakeUserCode: something that connects to an agent and speaks
// the protocol without the handshake (user code inside the sandbox) gets
// nothing and is cut off.
func TestHandshakeUserCode(t *testing.T) {
	h, a := net.Pipe()
	defer h.Close()
	done := make(chan error, 1)
	go func() { done <- AgentHandshake(a, bytes.Repeat([]byte{7}, KeySize)); a.Close() }()
	go h.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"))
	if err := <-done; !errors.Is(err, ErrAuth) {
		t.Fatalf("agent handshake with user code: %v, want ErrAuth", err)
	}
	h.SetReadDeadline(time.Now().Add(time.Second))
	if n, _ := h.Read(make([]byte, 100)); n != 0 {
		t.Errorf("agent answered %d bytes before any proof", n)
	}
}

// TestHandshakeTimeout: a peer that never answers does not hold the host
// past its context.
func TestHandshakeTimeout(t *testing.T) {
	h, a := net.Pipe()
	defer h.Close()
	defer a.Close()
	go io.Copy(io.Discard, a)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := HostHandshake(ctx, h, []byte("0123456789abcdef")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

// BenchmarkHandshake: both sides of the handshake over a unix socket
// pair, per connection.
func BenchmarkHandshake(b *testing.B) {
	key := bytes.Repeat([]byte{7}, KeySize)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		h, a := unixPair(b)
		done := make(chan error, 1)
		go func() { done <- AgentHandshake(a, key) }()
		if err := HostHandshake(ctx, h, key); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		h.Close()
		a.Close()
	}
}

func unixPair(tb testing.TB) (net.Conn, net.Conn) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var cs [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			tb.Fatal(err)
		}
		cs[i] = c
	}
	return cs[0], cs[1]
}
