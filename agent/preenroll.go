package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// PendingEnrollment is an enrollment of a pool agent with everything done
// but the part that commits: the connection, TLS, and the agent's proof
// of the pool key on this TLS session, checked. The host has shown
// nothing of the key and delivered nothing; closing it leaves the agent
// as it was, still waiting for its one enrollment. What is left (the
// host's proof and the enrollment in one flight, and the agent's answer)
// is one round trip, so a caller that learns a pod's address before it
// has decided to enroll it (the pod read that confirms it) opens this
// first and sends the enrollment once it has.
//
// The agent bounds the handshake by HandshakeTimeout from the moment it
// accepted the connection: a pending enrollment older than that has been
// closed by the agent (Opened says when it was made).
type PendingEnrollment struct {
	c      BoundConn
	h      helloed
	opened time.Time
}

// BeginEnrollment connects to a pool agent with dial and runs the first
// half of the enrollment's handshake: the agent proves poolKey. A peer
// that cannot fails with ErrAuth (permission_denied); a connection that
// could not be made at all with the dial's error in the chain.
func BeginEnrollment(ctx context.Context, dial PodDial, poolKey []byte) (*PendingEnrollment, error) {
	if len(poolKey) == 0 {
		return nil, fmt.Errorf("enroll: a pool key is needed: %w", errdefs.ErrInvalidArgument)
	}
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("enroll: %w", err)
	}
	binding, err := channelBinding(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("enroll: %w", err)
	}
	h, err := hostHello(ctx, c, poolKey, enrollProofs(binding))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("enroll: %w", err)
	}
	return &PendingEnrollment{c: c, h: h, opened: time.Now()}, nil
}

// Opened is when the agent proved the pool key.
func (p *PendingEnrollment) Opened() time.Time { return p.opened }

// Close abandons the enrollment: nothing was delivered.
func (p *PendingEnrollment) Close() error { return p.c.Close() }

// Session delivers e (its Serve set) and returns the session the agent
// serves on the same connection, as EnrollSession does; a nil client
// with a nil error: the agent took the enrollment and closed (dial it
// with DialPod). It uses up p, whatever the outcome.
func (p *PendingEnrollment) Session(ctx context.Context, e Enrollment, cfg ClientConfig) (*Client, error) {
	e.Serve = true
	msg, err := enrollment(p.h.key, e)
	if err != nil {
		p.c.Close()
		return nil, err
	}
	c, err := p.finish(ctx, msg, true)
	if err != nil || c == nil {
		return nil, err
	}
	return NewClient(c, cfg), nil
}

// finish sends the host's proof and the enrollment msg in one flight and
// reads the agent's answer; it returns the connection when the agent
// serves it (serve asked for it and the agent knows the field), else nil
// with the connection closed.
func (p *PendingEnrollment) finish(ctx context.Context, msg []byte, serve bool) (BoundConn, error) {
	c := p.c
	keep := false
	defer func() {
		if !keep {
			c.Close()
		}
	}()
	// The enrollment follows the host's proof in one flight: the agent
	// proved the pool key on this TLS session before it is sent.
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
	if err := p.h.prove(ctx, c, frame); err != nil {
		return nil, fmt.Errorf("enroll: %w", err)
	}
	defer handshakeDeadline(ctx, c)()
	var ok [1]byte
	if _, err := io.ReadFull(c, ok[:]); err != nil {
		return nil, fmt.Errorf("enroll: %w", handshakeErr(ctx, err))
	}
	switch {
	case ok[0] == enrollOK:
		return nil, nil
	case ok[0] == enrollServing && serve:
		keep = true
		return c, nil
	}
	return nil, fmt.Errorf("enroll: the agent refused the configuration: %w", errdefs.ErrFailedPrecondition)
}
