package local

// The daemon's connection to a sandbox's agent: the dial over the
// runtime's channel, the handshake with the sandbox's key, and what a
// sandbox that never answers is called.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/runtime"
)

// connect dials the agent over the runtime's channel and runs the
// handshake with key (a sealed session is pinged too); with wait set it
// waits for the agent to listen.
// A peer that fails the runtime's check or the handshake is never retried:
// it is not the sandbox's agent.
func (p *Provider) connect(ctx context.Context, id string, key []byte, wait bool) (*agent.Client, error) {
	// A channel a restore reopened may lead through a relay of the
	// sandbox's own code: its sessions are sealed (agent/sealed.go).
	cfg := agent.ClientConfig{SandboxID: id, Key: key, Sealed: p.rt.Reopened(id), Logger: p.log}
	// The agent listens a few ms after the runtime returns: DialWait waits
	// for it (tightly, and ends when the sandbox's init dies). A peer that
	// listens but fails the handshake is tried again, and now and then the
	// sandbox is checked to be alive.
	dial := p.rt.Dial
	if wait {
		dial = p.rt.DialWait
	}
	delay := 50 * time.Microsecond
	start := time.Now()
	nextCheck := start.Add(100 * time.Millisecond)
	tries := 0
	for {
		tries++
		conn, err := dial(ctx, id)
		if err == nil {
			dialed := time.Now()
			var c *agent.Client
			if c, err = agent.Connect(ctx, conn, cfg); err == nil {
				shaken := time.Now()
				// The agent proved the key: seal the channel before any
				// request (so before any user code) runs. The handshake's
				// last message is the agent's answer on this connection,
				// so a plain session needs no ping to know it is served;
				// a sealed one pings, its first sealed frame proving the
				// keys both sides derived.
				if err = p.rt.Seal(id); err == nil && cfg.Sealed {
					err = c.Ping(ctx)
				}
				if err == nil {
					if wait {
						p.log.Debug("agent connected", logkey.Sandbox, id, "dial", dialed.Sub(start), "tries", tries,
							"handshake", shaken.Sub(dialed), "seal_ping", time.Since(shaken))
					}
					return c, nil
				}
				c.Close()
			}
		}
		if errors.Is(err, errdefs.ErrPermissionDenied) {
			p.log.Warn("agent channel refused", logkey.Sandbox, id, logkey.Err, err)
			return nil, err
		}
		if !wait || ctx.Err() != nil || errors.Is(err, errdefs.ErrNotFound) {
			return nil, p.unreachable(ctx, id, err)
		}
		if time.Now().After(nextCheck) {
			if st, serr := p.rt.State(ctx, id); serr != nil || st.Status != runtime.StatusRunning {
				return nil, p.unreachable(ctx, id, err)
			}
			nextCheck = time.Now().Add(250 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*3/2, 500*time.Microsecond)
	}
}

// unreachable classifies a failed connection: not_found when the sandbox
// is gone or stopped, unavailable when it runs but its agent does not answer.
// A cause that is not_found is the runtime's own finding that no live init
// is there (its channel's check) and decides; otherwise the runtime's
// state does, which reads stopped from an init's kill on (a handshake cut
// by its death), not only once it is reaped.
func (p *Provider) unreachable(ctx context.Context, id string, cause error) error {
	if errors.Is(cause, errdefs.ErrNotFound) {
		return fmt.Errorf("sandbox %s: %v: %w", id, cause, errdefs.ErrNotFound)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st, err := p.rt.State(sctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err == nil && st.Status != runtime.StatusRunning && st.Status != runtime.StatusPaused {
		return fmt.Errorf("sandbox %s is %s: %w", id, st.Status, errdefs.ErrNotFound)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sandbox %s: agent not ready (%v): %w", id, cause, ctx.Err())
	}
	return fmt.Errorf("sandbox %s: agent: %v: %w", id, cause, errdefs.ErrUnavailable)
}
