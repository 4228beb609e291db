package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestForwardPendingBounded: connections that send no head hold a place
// among MaxPending; beyond it the proxy closes a new connection at once
// instead of keeping its descriptor for HeadTimeout (before the bound, the
// fifth connection stayed open and the read below timed out). A
// connection that is judged frees its place.
func TestForwardPendingBounded(t *testing.T) {
	px, err := New(NewRegistry(), Config{Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("no names here") }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); px.Close() })
	const max = 4
	go px.ServeForward(l, ForwardConfig{Key: []byte(strings.Repeat("k", 32)), MaxPending: max, HeadTimeout: time.Minute,
		Identify: func(context.Context, string) (*Sandbox, []netip.Addr, error) {
			return nil, nil, errors.New("no such sandbox")
		}})
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp4", l.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	idle := make([]net.Conn, max)
	for i := range idle {
		idle[i] = dial()
	}
	// The proxy accepts in order: once the idle ones hold every place, the
	// next is closed. Its read ends (EOF or reset) long before HeadTimeout.
	over := dial()
	over.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(over); isTimeout(err) {
		t.Fatalf("a connection beyond MaxPending=%d was kept open: %v", max, err)
	}
	// One idle connection sends a head and is judged (407): its place is
	// free again, and a new connection is served.
	ask := func(c net.Conn) string {
		t.Helper()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(c)
		return string(b)
	}
	if got := ask(idle[0]); !strings.Contains(got, "407") {
		t.Fatalf("an idle connection's head: %q, want a 407", got)
	}
	// The place is freed as the answer is written; wait for it with a bound.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got := ask(dial()); strings.Contains(got, "407") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after one connection was judged, a new one still got %q; want a 407", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
