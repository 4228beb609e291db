package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
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

// seqAgent serves one connection at a time, handling its requests in
// order (as the agent answers a ping: inline, before the next frame);
// handle reports false to hang up.
func seqAgent(t *testing.T, handle func(w io.Writer, req Request) bool) string {
	t.Helper()
	sock, ln := listenUnix(t)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				var req Request
				if json.Unmarshal(sc.Bytes(), &req) != nil || !handle(conn, req) {
					break
				}
			}
			conn.Close()
		}
	}()
	return sock
}

// TestClientProbe: a call made WithProbe sends a ping ahead of its
// request, and its failure is marked ErrNotSent exactly when the
// connection ended before that ping was answered (the agent never got to
// the request); a ping answered proves the agent was there, and the call
// may have run.
func TestClientProbe(t *testing.T) {
	answer := func(w io.Writer, req Request) {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(req)+`,"result":{"version":"1"}}`+"\n")
	}
	ctx := WithProbe(context.Background())
	for _, tc := range []struct {
		name    string
		handle  func(w io.Writer, req Request) bool
		notSent bool
		ok      bool
	}{
		{"answered", func(w io.Writer, req Request) bool { answer(w, req); return true }, false, true},
		{"gone before the ping", func(io.Writer, Request) bool { return false }, true, false},
		{"gone after the ping", func(w io.Writer, req Request) bool {
			if req.Method == MethodPing {
				answer(w, req)
				return true
			}
			return false
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var methods []string
			var mu sync.Mutex
			c := dialFake(t, seqAgent(t, func(w io.Writer, req Request) bool {
				mu.Lock()
				methods = append(methods, req.Method)
				mu.Unlock()
				return tc.handle(w, req)
			}))
			_, err := c.Processes(ctx)
			if tc.ok != (err == nil) || errors.Is(err, ErrNotSent) != tc.notSent {
				t.Fatalf("err = %v, want ok %v, not sent %v", err, tc.ok, tc.notSent)
			}
			if err != nil && !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("err = %v, want unavailable", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if methods[0] != MethodPing {
				t.Fatalf("the agent saw %v, want the ping first", methods)
			}
		})
	}
	// Without the probe, an agent that hangs up on the request's bytes
	// leaves the call unmarked: it may have run.
	c := dialFake(t, seqAgent(t, func(io.Writer, Request) bool { return false }))
	if _, err := c.Processes(context.Background()); err == nil || errors.Is(err, ErrNotSent) {
		t.Fatalf("without the probe: %v", err)
	}
}
