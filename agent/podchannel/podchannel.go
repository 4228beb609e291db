// Package podchannel dials the pod channel (agent/channel.go): the host's
// connections to a pod's agent, over TLS (agent/podtls), and the server
// side's TLS for the pod agent (cmd/sandlot-pod-agent). The protocol on
// those connections is package agent's; this package adds the TLS that
// the local agent does not link.
package podchannel

import (
	"context"
	"fmt"
	"net"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podtls"
	"github.com/sandlot/sandlot/errdefs"
)

// DialPod connects to the agent at addr (host:port on the pod network)
// and proves cfg.Key (agent.OpenPod). Every function here checks its
// arguments before it dials (invalid_argument); a connection that could
// not be made is unavailable, with the dial's *net.OpError in the chain.
func DialPod(ctx context.Context, addr string, cfg agent.ClientConfig) (*agent.Client, error) {
	if len(cfg.Key) == 0 {
		return nil, fmt.Errorf("pod channel: no key: %w", errdefs.ErrInvalidArgument)
	}
	c, err := podtls.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", cfg.SandboxID, err)
	}
	return agent.OpenPod(ctx, c, cfg)
}

// Enroll claims the pool agent at addr (agent.Enroll).
func Enroll(ctx context.Context, addr string, poolKey []byte, e agent.Enrollment) error {
	if err := agent.CheckEnrollment(poolKey, e); err != nil {
		return err
	}
	c, err := podtls.Dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	return agent.Enroll(ctx, c, poolKey, e)
}

// EnrollSession enrolls the pool agent at addr and is served on the same
// connection (agent.EnrollSession). A nil client with a nil error: the
// agent took the enrollment and closed the connection; dial it with
// DialPod.
func EnrollSession(ctx context.Context, addr string, poolKey []byte, e agent.Enrollment, cfg agent.ClientConfig) (*agent.Client, error) {
	if err := agent.CheckEnrollment(poolKey, e); err != nil {
		return nil, err
	}
	c, err := podtls.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("enroll: %w", err)
	}
	return agent.EnrollSession(ctx, c, poolKey, e, cfg)
}

// BeginEnrollment connects to the pool agent at addr and runs the first
// half of the enrollment's handshake (agent.BeginEnrollment). A
// connection that could not be made at all fails with the dial's
// *net.OpError in the chain.
func BeginEnrollment(ctx context.Context, addr string, poolKey []byte) (*agent.PendingEnrollment, error) {
	if len(poolKey) == 0 {
		return nil, fmt.Errorf("enroll: a pool key is needed: %w", errdefs.ErrInvalidArgument)
	}
	c, err := podtls.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("enroll: %w", err)
	}
	return agent.BeginEnrollment(ctx, c, poolKey)
}

// NewServer makes the agent's ephemeral certificate and returns what
// wraps each accepted connection in TLS with it: the pod agent's
// server.Config.PodTLS.
func NewServer() (func(net.Conn) agent.BoundConn, error) {
	wrap, err := podtls.NewServer()
	if err != nil {
		return nil, err
	}
	return func(c net.Conn) agent.BoundConn { return wrap(c) }, nil
}
