package podchannel

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestArgumentsBeforeDialing: a call with a missing key or a malformed
// enrollment is invalid_argument, decided before anything is dialed (the
// address here refuses every connection); a call that is fine but cannot
// connect is unavailable, with the dial's *net.OpError in the chain.
func TestArgumentsBeforeDialing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := closedAddr(t)
	key := []byte("a sandbox key of 32 bytes, or so")
	pool := []byte("the pool's key, 32 bytes long...")
	for name, call := range map[string]func() error{
		"DialPod, no key": func() error {
			_, err := DialPod(ctx, addr, agent.ClientConfig{SandboxID: "s"})
			return err
		},
		"Enroll, no pool key": func() error { return Enroll(ctx, addr, nil, agent.Enrollment{Key: key}) },
		"Enroll, a short sandbox key": func() error {
			return Enroll(ctx, addr, pool, agent.Enrollment{Key: []byte("short")})
		},
		"EnrollSession, a short sandbox key": func() error {
			_, err := EnrollSession(ctx, addr, pool, agent.Enrollment{Key: []byte("short")}, agent.ClientConfig{SandboxID: "s", Key: key})
			return err
		},
		"BeginEnrollment, no pool key": func() error {
			_, err := BeginEnrollment(ctx, addr, nil)
			return err
		},
	} {
		if err := call(); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	for name, call := range map[string]func() error{
		"DialPod": func() error {
			_, err := DialPod(ctx, addr, agent.ClientConfig{SandboxID: "s", Key: key})
			return err
		},
		"Enroll": func() error { return Enroll(ctx, addr, pool, agent.Enrollment{Key: key}) },
		"BeginEnrollment": func() error {
			_, err := BeginEnrollment(ctx, addr, pool)
			return err
		},
	} {
		err := call()
		var op *net.OpError
		if !errors.Is(err, errdefs.ErrUnavailable) || !errors.As(err, &op) {
			t.Errorf("%s to a closed port: %v, want unavailable with a *net.OpError", name, err)
		}
	}
}
