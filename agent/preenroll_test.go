package agent

import (
	"errors"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// TestPendingEnrollment: the first half of an enrollment (the agent's
// proof of the pool key) delivers nothing: a pending enrollment that is
// closed leaves the agent waiting for its one enrollment, which a later
// one gets; a pending enrollment that is completed is the session
// EnrollSession gives; a peer that cannot prove the pool key fails at
// the first half, before the host shows anything.
func TestPendingEnrollment(t *testing.T) {
	cfg := ClientConfig{SandboxID: "s", Key: sandboxKey}
	t.Run("closed, then enrolled by another", func(t *testing.T) {
		ctx := testCtx(t)
		addr, results := startServingAgent(t, nil, poolKey, nil)
		pe, err := BeginEnrollment(ctx, podDial(addr), poolKey)
		if err != nil {
			t.Fatal(err)
		}
		pe.Close()
		if r := next(t, results); r.enrolled || r.serve || r.err == nil {
			t.Fatalf("agent after a closed pending enrollment: %+v, want nothing taken", r)
		}
		pe, err = BeginEnrollment(ctx, podDial(addr), poolKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pe.Session(ctx, Enrollment{Key: sandboxKey}, cfg)
		if err != nil || c == nil {
			t.Fatalf("session: %v, %v", c, err)
		}
		c.Close()
		if r := next(t, results); !r.enrolled || !r.serve || r.err != nil {
			t.Fatalf("agent: %+v, want enrolled and served", r)
		}
		d, err := OpenPod(ctx, podDial(addr), cfg)
		if err != nil {
			t.Fatalf("dial with the enrolled key: %v", err)
		}
		d.Close()
	})
	t.Run("held open, another host enrolls", func(t *testing.T) {
		// An enrollment begun at an address that turns out to be another
		// pod's (stale) is held open until the pod read; that pod's own
		// enrollment by another create must not wait on it.
		ctx := testCtx(t)
		addr, results := startServingAgent(t, nil, poolKey, nil)
		held, err := BeginEnrollment(ctx, podDial(addr), poolKey)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		c, err := EnrollSession(ctx, podDial(addr), poolKey, Enrollment{Key: sandboxKey}, cfg)
		if err != nil || c == nil {
			t.Fatalf("an enrollment beside a held one: %v, %v", c, err)
		}
		c.Close()
		if r := next(t, results); !r.enrolled || r.err != nil {
			t.Fatalf("agent: %+v, want enrolled", r)
		}
		// The held one, delivered late, is refused: the pod is enrolled.
		if s, err := held.Session(ctx, Enrollment{Key: otherKey}, cfg); err == nil {
			if s != nil {
				s.Close()
			}
			t.Fatal("a second enrollment of an enrolled pod was taken")
		}
	})
	t.Run("the wrong pool key", func(t *testing.T) {
		ctx := testCtx(t)
		addr, results := startServingAgent(t, nil, poolKey, nil)
		if pe, err := BeginEnrollment(ctx, podDial(addr), otherKey); !errors.Is(err, errdefs.ErrPermissionDenied) {
			if pe != nil {
				pe.Close()
			}
			t.Fatalf("begin with the wrong pool key: %v, want permission_denied", err)
		}
		if r := next(t, results); r.enrolled || r.err == nil {
			t.Fatalf("agent: %+v, want refused", r)
		}
	})
}
