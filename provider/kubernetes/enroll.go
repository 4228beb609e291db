package kubernetes

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
)

// early is a warm pod's enrollment begun at the address the bound claim's
// status names (agent-sandbox mirrors the Sandbox's status.podIPs there),
// while the create reads the pod: the connection, TLS and the agent's
// proof of the pool key run beside that read instead of after it. Nothing
// is delivered until the read confirmed the address is the bound pod's
// (take): the claim's status may lag the Sandbox's by a reconcile, and an
// address that is no longer the pod's must not get this sandbox's key.
type early struct {
	ip     string
	cancel context.CancelFunc
	done   chan struct{}
	pe     *agent.PendingEnrollment // set once done, when it succeeded
}

// beginEnroll starts the first half of the enrollment of the pool agent
// at ip, with t's pool key; connections that could not be made at all
// are tried again as the enrollment's are (retryDial).
func (p *Provider) beginEnroll(ctx context.Context, t templateConf, ip string) *early {
	ctx, cancel := context.WithCancel(ctx)
	e := &early{ip: ip, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		key, err := p.poolKey(ctx, t)
		if err != nil {
			return // the enrollment after the read says why
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(p.port))
		var pe *agent.PendingEnrollment
		if retryDial(ctx, func() (err error) {
			pe, err = podchannel.BeginEnrollment(ctx, addr, key)
			return err
		}) == nil {
			e.pe = pe
		}
	}()
	return e
}

// take returns the pending enrollment when it was made to one of pod's
// addresses (as the pod read shows them) and the agent still holds it
// open; otherwise it abandons it and returns nil, and the create enrolls
// at the pod's address as if none had been begun.
func (e *early) take(pod podRef) *agent.PendingEnrollment {
	if !slices.Contains(pod.ips, e.ip) {
		e.drop()
		return nil
	}
	<-e.done
	pe := e.pe
	e.pe = nil
	// The agent closes a handshake HandshakeTimeout after it accepted it;
	// half of that leaves the enrollment's round trip room.
	if pe != nil && time.Since(pe.Opened()) > agent.HandshakeTimeout/2 {
		pe.Close()
		pe = nil
	}
	return pe
}

// drop abandons whatever is still pending: nothing was delivered.
func (e *early) drop() {
	e.cancel()
	<-e.done
	if e.pe != nil {
		e.pe.Close()
		e.pe = nil
	}
}

// claimIP is the first address a bound claim's status names, or "".
func claimIP(c *unstructured.Unstructured) string {
	ips, _, _ := unstructured.NestedStringSlice(c.Object, "status", "sandbox", "podIPs")
	if len(ips) == 0 {
		return ""
	}
	return ips[0]
}

// enroll delivers the enrollment to the pod's agent and returns the
// session on its connection (agent.EnrollSession): on pre's pending
// enrollment when it is the pod's, else on a new connection, with the
// pool key when the pod is a warm one (poolKey non-nil) or the cold pod's
// enrollment key. A nil client with a nil error: the agent closed the
// enrollment's connection (dial it).
func (p *Provider) enroll(ctx context.Context, pre *early, pod podRef, key []byte, e agent.Enrollment, cfg agent.ClientConfig) (c *agent.Client, usedEarly bool, err error) {
	if pre != nil {
		if pe := pre.take(pod); pe != nil {
			c, err = pe.Session(ctx, e, cfg)
			if err != nil {
				return nil, true, fmt.Errorf("pod %s: %w", pod.name, err)
			}
			return c, true, nil
		}
	}
	addr := net.JoinHostPort(pod.ip, strconv.Itoa(p.port))
	err = retryDial(ctx, func() (err error) {
		c, err = podchannel.EnrollSession(ctx, addr, key, e, cfg)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("pod %s: %w", pod.name, err)
	}
	return c, false, nil
}
