package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// unixPair returns both ends of a connected unix stream socket.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			acc <- nil
			return
		}
		acc <- c
	}()
	a, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	b := <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestNewOnlyForPolledSockets(t *testing.T) {
	a, _ := unixPair(t)
	if New(a) == nil {
		t.Error("a unix socket has a descriptor to use")
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if New(p1) != nil {
		t.Error("an in-memory pipe has no descriptor: it must be used as it is")
	}
}

func TestReadWriterChoosesRawOrPlain(t *testing.T) {
	a, _ := unixPair(t)
	if _, ok := ReadWriter(a).(*Conn); !ok {
		t.Errorf("ReadWriter(unix socket) = %T, want the raw calls (*Conn)", ReadWriter(a))
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if rw := ReadWriter(p1); rw != io.ReadWriter(p1) {
		t.Errorf("ReadWriter(net.Pipe) = %T, want the connection itself", rw)
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	a, b := unixPair(t)
	ra, rb := New(a), New(b)
	// Larger than the socket's buffer: Write must wait for the reader and
	// finish the whole frame, Read must see every byte in order.
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	errc := make(chan error, 1)
	go func() {
		n, err := ra.Write(msg)
		if err == nil && n != len(msg) {
			err = errors.New("short write")
		}
		errc <- err
	}()
	got := make([]byte, 0, len(msg))
	buf := make([]byte, 4096)
	for len(got) < len(msg) {
		n, err := rb.Read(buf)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("bytes differ")
	}
	if n, err := rb.Read(nil); n != 0 || err != nil {
		t.Errorf("empty read = %d, %v", n, err)
	}
}

func TestReadEOF(t *testing.T) {
	a, b := unixPair(t)
	rb := New(b)
	if _, err := New(a).Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	buf := make([]byte, 8)
	if n, err := rb.Read(buf); n != 1 || err != nil {
		t.Fatalf("read = %d, %v", n, err)
	}
	if _, err := rb.Read(buf); err != io.EOF {
		t.Fatalf("read at the end = %v, want EOF", err)
	}
}

// The deadlines set on the conn still bound a raw read and a raw write:
// the wait is the netpoller's.
func TestDeadlinesHold(t *testing.T) {
	a, b := unixPair(t)
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := New(b).Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline = %v", err)
	}
	// Nobody reads b: a write larger than the buffers stalls and must end
	// at its deadline with the bytes that went through counted.
	a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := New(a).Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled write = %d, %v", n, err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Errorf("stalled write reports %d bytes", n)
	}
}

func TestWriteToClosedPeer(t *testing.T) {
	a, b := unixPair(t)
	b.Close()
	ra := New(a)
	var err error
	for i := 0; i < 100 && err == nil; i++ { // the first write may still be taken
		_, err = ra.Write([]byte("frame\n"))
	}
	if err == nil {
		t.Fatal("writes to a closed peer kept succeeding")
	}
	a.Close()
	if _, err := ra.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a closed conn = %v, want net.ErrClosed", err)
	}
}
