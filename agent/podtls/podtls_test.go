package podtls

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// tls12Server accepts connections and completes TLS 1.2 at most with the
// agent's kind of certificate.
func tls12Server(t *testing.T) string {
	t.Helper()
	cert, err := newCertificate()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.Read(make([]byte, 1))
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTLS13Only: the host does not complete TLS with a peer that stops at
// 1.2, and a 1.2 session has no binding.
func TestTLS13Only(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := tls12Server(t)
	if c, err := Dial(ctx, addr); err == nil {
		c.Close()
		t.Fatal("Dial completed TLS with a TLS 1.2 server")
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := Conn{tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})}
	defer c.Close()
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Binding(); err == nil {
		t.Fatalf("a TLS 1.2 session gave a binding %x", b)
	}
}

// TestServerAndDial: the agent's side (NewServer) and the host's (Dial)
// agree on one binding, and a second session has another.
func TestServerAndDial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wrap, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	agentSide := make(chan []byte, 2)
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			c := wrap(raw)
			if c.Handshake() != nil {
				agentSide <- nil
				continue
			}
			b, _ := c.Binding()
			agentSide <- b
		}
	}()
	var prev []byte
	for i := 0; i < 2; i++ {
		c, err := Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		host, err := c.Binding()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := <-agentSide; len(host) != 32 || string(got) != string(host) {
			t.Fatalf("bindings differ: agent %x, host %x", got, host)
		}
		if string(host) == string(prev) {
			t.Fatal("two sessions gave one binding")
		}
		prev = host
	}
}
