package agent

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// bufConn is a net.Conn whose writes land in a buffer its reads drain.
type bufConn struct {
	net.Conn
	b *bytes.Buffer
}

func (c bufConn) Write(p []byte) (int, error) { return c.b.Write(p) }
func (c bufConn) Read(p []byte) (int, error)  { return c.b.Read(p) }

// BenchmarkSealedFrame: the sealed layer's CPU per frame of a warm call's
// size, one seal and one open (a call is two frames: a request and its
// result).
func BenchmarkSealedFrame(b *testing.B) {
	key := bytes.Repeat([]byte{1}, KeySize)
	nh, na := bytes.Repeat([]byte{2}, nonceSize), bytes.Repeat([]byte{3}, nonceSize)
	var buf bytes.Buffer
	host, err := newSealedConn(bufConn{b: &buf}, key, nh, na, true)
	if err != nil {
		b.Fatal(err)
	}
	ag, err := newSealedConn(bufConn{b: &buf}, key, nh, na, false)
	if err != nil {
		b.Fatal(err)
	}
	frame := []byte(`{"jsonrpc":"2.0","id":12345,"method":"kernel.run","params":{"language":"python","code":"x + 1","timeoutMs":30000}}` + "\n")
	out := make([]byte, 4096)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, err := host.Write(frame); err != nil {
			b.Fatal(err)
		}
		if n, err := ag.Read(out); err != nil || n != len(frame) {
			b.Fatal(n, err)
		}
	}
}

// TestSealedNoDowngrade: a relay that turns the host's sealed hello into a
// plain one for the agent, and the agent's plain reply back into a sealed
// one, hands the host a proof made for the plain handshake: the host
// refuses it (ErrAuth), so no session is sealed on one side only. An
// agent before sealed sessions refuses the sealed hello outright.
func TestSealedNoDowngrade(t *testing.T) {
	key := bytes.Repeat([]byte{4}, KeySize)
	tests := []struct {
		name string
		peer func(c net.Conn)
	}{
		{name: "magic rewritten", peer: func(c net.Conn) {
			hello := make([]byte, len(handshakeMagic)+nonceSize)
			if _, err := io.ReadFull(c, hello); err != nil {
				return
			}
			// The plain proofs, under the sealed magic.
			agentProve(c, key, hello[len(handshakeMagic):], proofs{magic: sealedMagic, agent: "agent", host: "host"})
		}},
		{name: "old agent", peer: func(c net.Conn) { AgentHandshake(c, key) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, a := unixPair(t)
			defer h.Close()
			go func() { tc.peer(a); a.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Connect(ctx, h, ClientConfig{SandboxID: "t", Key: key, Sealed: true})
			if err == nil {
				t.Fatal("a sealed session opened with a peer that made no sealed proof")
			}
			if ctx.Err() != nil {
				t.Fatalf("the host waited for the context: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestSealedWriteBufferBounded: after large writes a sealed connection
// keeps at most one record's buffer, not the whole write's: the host
// holds a client per restored sandbox, and a megabyte per client adds up.
func TestSealedWriteBufferBounded(t *testing.T) {
	key := bytes.Repeat([]byte{5}, KeySize)
	nh, na := bytes.Repeat([]byte{6}, nonceSize), bytes.Repeat([]byte{7}, nonceSize)
	var buf bytes.Buffer
	s, err := newSealedConn(bufConn{b: &buf}, key, nh, na, true)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := newSealedConn(bufConn{b: &buf}, key, nh, na, false)
	if err != nil {
		t.Fatal(err)
	}
	record := 4 + maxRecordPlain + s.seal.Overhead()
	for _, size := range []int{100, maxRecordPlain, maxRecordPlain + 1, 1 << 20, 1<<20 - 1000} {
		p := bytes.Repeat([]byte{'x'}, size)
		if n, err := s.Write(p); err != nil || n != size {
			t.Fatalf("Write(%d) = %d, %v", size, n, err)
		}
		if c := cap(s.wbuf); c > record {
			t.Fatalf("after a write of %d bytes the connection keeps a %d-byte buffer, want at most one record's %d", size, c, record)
		}
		got := make([]byte, size)
		if _, err := io.ReadFull(peer, got); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("read back %d bytes: %v", size, err)
		}
	}
}
