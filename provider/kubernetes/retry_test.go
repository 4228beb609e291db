package kubernetes

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/errdefs"
)

// TestRetryDial: a connection refused for a moment (the policy enforcer
// moving a relabelled pod) is tried again until it opens; a failure after
// the connection was made (the agent refused the key) is not.
func TestRetryDial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until it listens again
	opened := make(chan net.Listener, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
		}
		opened <- l
	}()
	tries := 0
	err = retryDial(ctx, func() error {
		tries++
		c, err := podchannel.DialPod(ctx, addr, agent.ClientConfig{SandboxID: "k8s-000000000000", Key: make([]byte, agent.KeySize)})
		if err == nil {
			c.Close()
		}
		return err
	})
	l := <-opened
	defer l.Close()
	// The listener accepts and never answers the TLS handshake, which
	// fails at the deadline once connected: that is not tried again.
	if err == nil || tries < 2 {
		t.Fatalf("after %d tries: %v; want refused at first, then a failure past the dial", tries, err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		t.Errorf("ended on a dial failure: %v", err)
	}

	tries = 0
	err = retryDial(ctx, func() error { tries++; return errdefs.ErrPermissionDenied })
	if tries != 1 || !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("a refusal past the dial: %d tries, %v", tries, err)
	}
}
