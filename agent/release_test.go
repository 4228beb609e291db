package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// TestReleaseWaitsForTheAgentToLetGo: the agent answers a release first
// and closes its listener and connections after, so the answer alone
// does not say that the channel is free (a checkpoint taken in between
// fails on the agent's bound socket). Release returns only once the
// agent has ended the connection, and a ctx that ends before says so.
func TestReleaseWaitsForTheAgentToLetGo(t *testing.T) {
	answered := make(chan struct{})
	letGo := make(chan struct{})
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", *req.ID)
		close(answered)
		<-letGo
		w.(net.Conn).Close()
	})
	c := dialFake(t, sock)
	done := make(chan error, 1)
	go func() { done <- c.Release(context.Background()) }()
	<-answered
	// Not a proof of waiting (a slow scheduler could delay a wrong
	// return), but a Release that returns at the answer fails here on
	// any machine that runs it within the bound.
	select {
	case err := <-done:
		t.Fatalf("Release returned (%v) while the agent still held the connection", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(letGo)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Release after the agent let go: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Release did not return after the agent closed the connection")
	}

	// An agent that answers and never lets go: Release ends with ctx.
	sock = fakeAgent(t, func(w io.Writer, req Request) {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", *req.ID)
	})
	c = dialFake(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Release(ctx); err == nil {
		t.Fatal("Release of an agent that kept the connection: no error")
	}
}
