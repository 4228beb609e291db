// Package podchannel dials the pod channel (agent/channel.go): the host's
// connections to a pod's agent, over TLS (agent/podtls), and the server
// side's TLS for the pod agent (cmd/sandlot-pod-agent). The protocol on
// those connections is package agent's; this package adds the TLS that
// the local agent does not link.
package podchannel

import (
	"context"
	"net"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podtls"
)

// Dial is what connects to the agent at addr (host:port on the pod
// network): TCP and TLS. A connection that could not be made is
// unavailable, with the dial's *net.OpError in the chain.
func Dial(addr string) agent.PodDial {
	return func(ctx context.Context) (agent.BoundConn, error) {
		c, err := podtls.Dial(ctx, addr)
		if err != nil {
			return nil, err // not a BoundConn holding a nil *tls.Conn
		}
		return c, nil
	}
}

// DialPod connects to the agent at addr and proves cfg.Key
// (agent.OpenPod). Here as in the calls below, arguments are checked
// before anything is dialed (invalid_argument).
func DialPod(ctx context.Context, addr string, cfg agent.ClientConfig) (*agent.Client, error) {
	return agent.OpenPod(ctx, Dial(addr), cfg)
}

// Enroll claims the pool agent at addr (agent.Enroll).
func Enroll(ctx context.Context, addr string, poolKey []byte, e agent.Enrollment) error {
	return agent.Enroll(ctx, Dial(addr), poolKey, e)
}

// EnrollSession enrolls the pool agent at addr and is served on the same
// connection (agent.EnrollSession).
func EnrollSession(ctx context.Context, addr string, poolKey []byte, e agent.Enrollment, cfg agent.ClientConfig) (*agent.Client, error) {
	return agent.EnrollSession(ctx, Dial(addr), poolKey, e, cfg)
}

// BeginEnrollment connects to the pool agent at addr and runs the first
// half of the enrollment's handshake (agent.BeginEnrollment).
func BeginEnrollment(ctx context.Context, addr string, poolKey []byte) (*agent.PendingEnrollment, error) {
	return agent.BeginEnrollment(ctx, Dial(addr), poolKey)
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
