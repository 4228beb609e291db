package agent

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// failWriteConn fails every write after writing n bytes of it.
type failWriteConn struct {
	net.Conn
	n int
}

func (c *failWriteConn) Write(p []byte) (int, error) {
	return min(c.n, len(p)), errors.New("broken pipe")
}

// TestClientNotSent: a call marks ErrNotSent exactly when no byte of its
// request reached the connection.
func TestClientNotSent(t *testing.T) {
	ok := func(w io.Writer, req Request) {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(req)+`,"result":{"version":"1"}}`+"\n")
	}
	ctx := context.Background()

	// Closed before the call.
	c := dialFake(t, fakeAgent(t, ok))
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	err := c.Ping(ctx)
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("call on a closed client: %v", err)
	}

	// The write fails having written nothing, or a part.
	for _, tc := range []struct {
		n       int
		notSent bool
	}{{0, true}, {5, false}} {
		conn, err := net.Dial("unix", fakeAgent(t, ok))
		if err != nil {
			t.Fatal(err)
		}
		c := NewClient(&failWriteConn{Conn: conn, n: tc.n}, ClientConfig{Logger: discardLogger()})
		err = c.Ping(ctx)
		c.Close()
		if errors.Is(err, ErrNotSent) != tc.notSent || !errors.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("write of %d bytes then an error: %v (want not sent %v)", tc.n, err, tc.notSent)
		}
	}

	// The request was sent and the agent hung up without answering: it
	// may have run, so it is not marked.
	hangup := make(chan struct{}, 1)
	c = dialFake(t, fakeAgent(t, func(w io.Writer, req Request) {
		w.(net.Conn).Close()
		hangup <- struct{}{}
	}))
	err = c.Ping(ctx)
	<-hangup
	if err == nil || errors.Is(err, ErrNotSent) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("agent hung up after the request: %v", err)
	}
	// The connection is gone now: the next call is never sent.
	<-c.Done()
	if err := c.Ping(ctx); !errors.Is(err, ErrNotSent) {
		t.Fatalf("call after the agent hung up: %v", err)
	}
}
