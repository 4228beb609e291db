package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// The pod channel is how the host reaches an agent over a network it does
// not control (a Kubernetes pod network, provider/kubernetes). The agent
// listens on TCP and speaks TLS 1.3 with a certificate it makes at start
// and nobody verifies; inside, the handshake of handshake.go runs with
// each MAC also covering the TLS session's exported keying material
// (RFC 8446 §7.5, RFC 9266's idea). A relay that terminates TLS on both
// sides has two sessions with two different exports, so the proofs it
// relays check on neither side: the key authenticates the peer, and the
// binding makes that peer the other end of this very TLS session.
//
// An agent has a sandbox key from its start (a cold pod: the key is in a
// Secret only that pod mounts), or a pool key shared by the warm pods of
// one template. A pool agent serves nothing: it accepts one enrollment,
// from a peer that proves the pool key, which delivers the sandbox's own
// key and its configuration (Enrollment); from then on it accepts only
// the sandbox key, and the pool key opens nothing.
const (
	// PodPort is the agent's TCP port in a pod.
	PodPort = 49983
	// podMagic opens the bound handshake with the sandbox key, enrollMagic
	// the bound handshake with the pool key that an enrollment follows.
	podMagic    = "SLP1"
	enrollMagic = "SLE1"
	// MaxEnrollment bounds an enrollment message.
	MaxEnrollment = 1 << 20
	enrollOK      = 0x01
	// enrollServing acknowledges an enrollment that asked to be served
	// on its own connection (Enrollment.Serve): the connection is now a
	// session with the sandbox key.
	enrollServing = 0x02
)

// Enrollment is what the host delivers to a pool agent when it claims its
// pod: the sandbox's key, which replaces the pool key, and the
// configuration of the context the pod now serves.
type Enrollment struct {
	// Key is the sandbox's key: every later connection must prove it.
	Key []byte `json:"key"`
	// Env joins the base environment of every process and kernel (the
	// context's environment, its secrets' placeholders, its proxy).
	Env map[string]string `json:"env,omitempty"`
	// CACerts (PEM) join the sandbox's trust store: the agent writes the
	// system bundle plus these to a file and points the usual variables
	// at it (the egress proxy's CA, for secret injection).
	CACerts []byte `json:"caCerts,omitempty"`
	// Serve asks the agent to serve the enrollment's connection as the
	// sandbox's session once it took the key, so a create needs one TLS
	// connection, not two. The peer proved the pool key on this TLS
	// session and delivered the sandbox key on it: it is the holder of
	// that key, as a new connection proving it would show. An agent
	// that does not know the field acknowledges and closes (EnrollSession
	// then dials).
	Serve bool `json:"serve,omitempty"`
}

// BoundConn is a connection of the pod channel: TLS 1.3 (agent/podtls),
// whose session's exported keying material (Binding) the bound handshake
// covers. Package agent names only this interface, so the local agent,
// which never speaks TLS, links no TLS.
type BoundConn interface {
	net.Conn
	// Handshake completes the TLS handshake if it has not run yet.
	Handshake() error
	// Binding is the session's exported keying material.
	Binding() ([]byte, error)
}

// PodDial connects to a pod's agent and completes TLS (agent/podchannel
// dials with agent/podtls). The channel's calls take one rather than a
// connection, so they check their arguments before anything is dialed.
type PodDial func(context.Context) (BoundConn, error)

// channelBinding is c's binding; a session that has none fails with ErrAuth.
func channelBinding(c BoundConn) ([]byte, error) {
	b, err := c.Binding()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	return b, nil
}

func podProofs(binding []byte) proofs {
	return proofs{magic: podMagic, agent: "agent", host: "host", binding: binding}
}

func enrollProofs(binding []byte) proofs {
	return proofs{magic: enrollMagic, agent: "agent-enroll", host: "host-enroll", binding: binding}
}

// OpenPod connects to an agent with dial and proves cfg.Key, which the
// agent must prove too. A peer that does not hold it, or is not the other
// end of this TLS session, fails with ErrAuth (permission_denied).
func OpenPod(ctx context.Context, dial PodDial, cfg ClientConfig) (*Client, error) {
	if len(cfg.Key) == 0 {
		return nil, fmt.Errorf("pod channel: no key: %w", errdefs.ErrInvalidArgument)
	}
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", cfg.SandboxID, err)
	}
	binding, err := channelBinding(c)
	if err == nil {
		err = hostHandshake(ctx, c, cfg.Key, podProofs(binding))
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("sandbox %s: %w", cfg.SandboxID, err)
	}
	return NewClient(c, cfg), nil
}

// Enroll claims the pool agent dial connects to: it proves poolKey and
// delivers e. The agent refuses a second enrollment, and a peer without
// the pool key.
func Enroll(ctx context.Context, dial PodDial, poolKey []byte, e Enrollment) error {
	e.Serve = false
	c, err := enroll(ctx, dial, poolKey, e)
	if c != nil {
		c.Close()
	}
	return err
}

// EnrollSession enrolls the pool agent dial connects to as Enroll does and asks it
// to serve the sandbox on the same connection (Enrollment.Serve): the
// client returned speaks to the agent with the sandbox key cfg names
// (e.Key), one TLS connection for both. A nil client with a nil error
// means the agent took the enrollment and closed the connection (an
// agent before Serve): open a new one with OpenPod.
func EnrollSession(ctx context.Context, dial PodDial, poolKey []byte, e Enrollment, cfg ClientConfig) (*Client, error) {
	e.Serve = true
	c, err := enroll(ctx, dial, poolKey, e)
	if err != nil || c == nil {
		return nil, err
	}
	return NewClient(c, cfg), nil
}

// enroll runs an enrollment; it returns the connection when the agent
// serves it (e.Serve and an agent that knows it), else nil.
func enroll(ctx context.Context, dial PodDial, poolKey []byte, e Enrollment) (BoundConn, error) {
	msg, err := enrollment(poolKey, e)
	if err != nil {
		return nil, err
	}
	pe, err := BeginEnrollment(ctx, dial, poolKey)
	if err != nil {
		return nil, err
	}
	return pe.finish(ctx, msg, e.Serve)
}

// enrollment checks e and encodes it.
func enrollment(poolKey []byte, e Enrollment) ([]byte, error) {
	if len(poolKey) == 0 || len(e.Key) < 16 {
		return nil, fmt.Errorf("enroll: a pool key and a sandbox key are needed: %w", errdefs.ErrInvalidArgument)
	}
	msg, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	if len(msg) > MaxEnrollment {
		return nil, fmt.Errorf("enroll: %d bytes of configuration, at most %d: %w", len(msg), MaxEnrollment, errdefs.ErrInvalidArgument)
	}
	return msg, nil
}

// PodKeys is a pod agent's key state: a sandbox key, or a pool key until
// the one enrollment replaces it. Safe for concurrent use.
type PodKeys struct {
	// enrolling serializes enrollments, so two peers that both prove the
	// pool key cannot both enroll.
	enrolling sync.Mutex

	mu   sync.Mutex
	key  []byte // the sandbox key; nil until enrolled in a pool pod
	pool []byte // the pool key; nil in a cold pod and once enrolled
}

// NewPodKeys holds key (a cold pod's) or pool (a pool pod's); one of them.
func NewPodKeys(key, pool []byte) (*PodKeys, error) {
	if (len(key) == 0) == (len(pool) == 0) {
		return nil, errors.New("pod keys: exactly one of a sandbox key and a pool key")
	}
	return &PodKeys{key: key, pool: pool}, nil
}

// Enrolled reports whether the agent has its sandbox key.
func (k *PodKeys) Enrolled() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.key != nil
}

// Accept runs the agent's side of the pod channel on c, a connection it
// accepted: TLS, then the bound handshake. It returns nil when the peer
// proved the sandbox key and may be served. When the peer proved the pool
// key instead, Accept reads its enrollment, hands it to apply, and on
// success takes its key as the sandbox key and forgets the pool key;
// enrolled is then true, and the connection is done (the caller closes
// it) unless the enrollment asked to be served on it (Enrollment.Serve):
// serve is then true and the caller serves it as a session. Any other
// peer gets ErrAuth.
func (k *PodKeys) Accept(c BoundConn, apply func(Enrollment) error) (enrolled, serve bool, err error) {
	c.SetDeadline(time.Now().Add(HandshakeTimeout))
	defer c.SetDeadline(time.Time{})
	if err := c.Handshake(); err != nil {
		return false, false, fmt.Errorf("%w: tls: %v", ErrAuth, err)
	}
	binding, err := channelBinding(c)
	if err != nil {
		return false, false, err
	}
	hello := make([]byte, len(handshakeMagic)+nonceSize)
	if _, err := io.ReadFull(c, hello); err != nil {
		return false, false, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	nonceH := hello[len(handshakeMagic):]
	switch string(hello[:len(handshakeMagic)]) {
	case podMagic:
		k.mu.Lock()
		key := k.key
		k.mu.Unlock()
		if key == nil {
			return false, false, fmt.Errorf("%w: not enrolled yet", ErrAuth)
		}
		return false, false, agentProve(c, key, nonceH, podProofs(binding))
	case enrollMagic:
		serve, err := k.enroll(c, nonceH, binding, apply)
		return err == nil, serve && err == nil, err
	default:
		return false, false, fmt.Errorf("%w: no handshake", ErrAuth)
	}
}

// enroll reads and applies an enrollment on c, a peer that opened with
// the enrollment's handshake; serve: it asked to be served on c.
func (k *PodKeys) enroll(c BoundConn, nonceH, binding []byte, apply func(Enrollment) error) (serve bool, err error) {
	k.mu.Lock()
	pool := k.pool
	k.mu.Unlock()
	if pool == nil {
		return false, fmt.Errorf("%w: enrollment refused: enrolled already, or not a pool pod", ErrAuth)
	}
	if err := agentProve(c, pool, nonceH, enrollProofs(binding)); err != nil {
		return false, err
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return false, fmt.Errorf("enrollment: %v", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > MaxEnrollment {
		c.Write([]byte{0})
		return false, fmt.Errorf("enrollment: %d bytes, at most %d", size, MaxEnrollment)
	}
	msg := make([]byte, size)
	if _, err := io.ReadFull(c, msg); err != nil {
		return false, fmt.Errorf("enrollment: %v", err)
	}
	var e Enrollment
	if err := json.Unmarshal(msg, &e); err != nil || len(e.Key) < 16 {
		c.Write([]byte{0})
		return false, fmt.Errorf("enrollment: malformed (%v)", err)
	}
	// One enrollment applies at a time. The lock is taken only now, with
	// the whole message read: a host that proved the pool key and then
	// waits (an enrollment begun early, at an address that may be stale)
	// holds nothing another host's enrollment needs.
	k.enrolling.Lock()
	defer k.enrolling.Unlock()
	k.mu.Lock()
	taken := k.pool == nil
	k.mu.Unlock()
	if taken {
		c.Write([]byte{0})
		return false, fmt.Errorf("%w: enrollment refused: enrolled already", ErrAuth)
	}
	if err := apply(e); err != nil {
		c.Write([]byte{0})
		return false, fmt.Errorf("enrollment: %w", err)
	}
	k.mu.Lock()
	k.key = e.Key
	clear(k.pool)
	k.pool = nil
	k.mu.Unlock()
	ack := byte(enrollOK)
	if e.Serve {
		ack = enrollServing
	}
	if _, err := c.Write([]byte{ack}); err != nil {
		return false, err
	}
	return e.Serve, nil
}
