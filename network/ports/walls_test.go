package ports

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/netns"
)

// TestWallSilentServer attacks the route's transport with a server in
// the sandbox that accepts and never answers: each held request would
// keep the caller's connection and the route's to the sandbox open for
// ever. The route gives up after ResponseTimeout with a 504.
func TestWallSilentServer(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ResponseTimeout = 300 * time.Millisecond })
	n := f.nets["public"]
	l, err := netns.Listen(context.Background(), n.Path, "tcp4", "0.0.0.0:8090")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	done := make(chan struct{})
	var status int
	var body string
	go func() {
		defer close(done)
		status, _, body = f.get(t, Host(DefaultDomain, "public", 8090), "/", "")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a request to a server that never answers was held for 30 s")
	}
	if status != http.StatusGatewayTimeout || !strings.Contains(body, "did not answer within 300ms") {
		t.Errorf("got %d %q, want a 504 naming the timeout", status, body)
	}
}
