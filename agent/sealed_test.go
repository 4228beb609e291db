package agent

import (
	"bytes"
	"net"
	"testing"
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
