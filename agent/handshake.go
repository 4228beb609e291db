package agent

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// The handshake opens every connection between the host and an agent that
// has a key (a per-sandbox secret the host keeps, handed to the agent at
// start where no other process in the sandbox can read it). Each side
// proves it holds the key with an HMAC over both sides' fresh nonces, so
// neither a process that binds where the agent would listen nor user code
// that connects to the agent gets anywhere, and a proof cannot be replayed:
//
//	host  -> agent: magic, nonceH                     (36 bytes)
//	agent -> host:  magic, nonceA, HMAC(k, "agent" nonceH nonceA)  (68 bytes)
//	host  -> agent: HMAC(k, "host" nonceA nonceH)     (32 bytes)
//	agent -> host:  1 byte, handshakeOK (or handshakeRefused, then close)
//
// Then the JSON-RPC stream begins. A side that sees anything else closes
// the connection. The agent answers a wrong proof with an explicit
// refusal, so the host can tell a refusal (the peer is not the sandbox's
// agent: never retried) from a connection that broke or ran out of time
// on a loaded machine (unavailable or deadline: retried by the caller).
const (
	handshakeMagic   = "SLA1"
	nonceSize        = 32
	macSize          = sha256.Size
	handshakeOK      = 0x01
	handshakeRefused = 0x00
	// KeySize is the size of the keys the host makes.
	KeySize = 32
	// HandshakeTimeout bounds a handshake that has no earlier deadline.
	HandshakeTimeout = 10 * time.Second
)

// ErrAuth marks a peer that failed the handshake: it does not hold the
// sandbox's key, or does not speak the protocol.
var ErrAuth = errors.New("agent authentication failed")

// handshakeMAC is one side's proof. binding, when set, ties the proof to
// the transport it travels on (channel.go): nil gives the MACs of the
// unix-socket handshake, unchanged.
func handshakeMAC(key []byte, role string, a, b []byte, binding ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(role))
	m.Write(a)
	m.Write(b)
	for _, x := range binding {
		m.Write(x)
	}
	return m.Sum(nil)
}

// proofs names one kind of handshake: its magic and the roles its MACs
// are made for, and the channel binding they cover (nil on a unix socket).
type proofs struct {
	magic, agent, host string
	binding            []byte
}

// unbound is the handshake on a channel the runtime guarantees (one host).
var unbound = proofs{magic: handshakeMagic, agent: "agent", host: "host"}

// HostHandshake authenticates the agent at the other end of conn and
// proves the host's own knowledge of key. It fails with ErrAuth (and
// errdefs.ErrPermissionDenied) when the peer does not hold key.
func HostHandshake(ctx context.Context, conn net.Conn, key []byte) error {
	return hostHandshake(ctx, conn, key, unbound)
}

func hostHandshake(ctx context.Context, conn net.Conn, key []byte, pr proofs) error {
	return hostHandshakeThen(ctx, conn, key, pr, nil)
}

// hostHandshakeThen is hostHandshake that writes then right after the
// host's proof, before the agent's verdict: once the agent proved the key
// on this channel, what follows the proof may go in the same flight (an
// enrollment: one round trip less). An agent that refuses the host's
// proof reads none of it.
func hostHandshakeThen(ctx context.Context, conn net.Conn, key []byte, pr proofs, then []byte) error {
	_, _, err := hostProve(ctx, conn, key, pr, then)
	return err
}

// hostProve is hostHandshakeThen that returns both sides' nonces (a sealed
// session derives its keys from them).
func hostProve(ctx context.Context, conn net.Conn, key []byte, pr proofs, then []byte) (nonceH, nonceA []byte, err error) {
	if len(key) == 0 {
		return nil, nil, fmt.Errorf("handshake: no key: %w", errdefs.ErrInvalidArgument)
	}
	h, err := hostHello(ctx, conn, key, pr)
	if err != nil {
		return nil, nil, err
	}
	if err := h.prove(ctx, conn, then); err != nil {
		return nil, nil, err
	}
	return h.nonceH, h.nonceA, nil
}

// helloed is a handshake whose first half is done: the agent proved the
// key on this channel, the host has not proved it yet.
type helloed struct {
	key            []byte
	pr             proofs
	nonceH, nonceA []byte
}

// handshakeDeadline bounds one half of a handshake on conn: ctx's deadline
// or HandshakeTimeout, whichever is sooner; ctx's end ends it at once.
// The returned func clears the deadline.
func handshakeDeadline(ctx context.Context, conn net.Conn) func() {
	deadline := time.Now().Add(HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		conn.SetDeadline(time.Time{})
	}
}

// hostHello is the handshake's first half: the host's hello, and the
// agent's proof of key, checked. Nothing of the host's key has been shown.
func hostHello(ctx context.Context, conn net.Conn, key []byte, pr proofs) (helloed, error) {
	defer handshakeDeadline(ctx, conn)()
	hello := make([]byte, len(handshakeMagic)+nonceSize)
	copy(hello, pr.magic)
	nonceH := hello[len(handshakeMagic):]
	rand.Read(nonceH)
	if _, err := conn.Write(hello); err != nil {
		return helloed{}, handshakeErr(ctx, err)
	}
	reply := make([]byte, len(handshakeMagic)+nonceSize+macSize)
	if _, err := io.ReadFull(conn, reply); err != nil {
		return helloed{}, handshakeErr(ctx, err)
	}
	if string(reply[:len(handshakeMagic)]) != pr.magic {
		return helloed{}, fmt.Errorf("%w: not an agent: %w", ErrAuth, errdefs.ErrPermissionDenied)
	}
	nonceA := reply[len(handshakeMagic) : len(handshakeMagic)+nonceSize]
	if !hmac.Equal(reply[len(handshakeMagic)+nonceSize:], handshakeMAC(key, pr.agent, nonceH, nonceA, pr.binding)) {
		return helloed{}, fmt.Errorf("%w: the peer does not hold the sandbox's key: %w", ErrAuth, errdefs.ErrPermissionDenied)
	}
	return helloed{key: key, pr: pr, nonceH: nonceH, nonceA: nonceA}, nil
}

// prove is the handshake's second half: the host's proof, then (in the
// same flight), and the agent's verdict.
func (h helloed) prove(ctx context.Context, conn net.Conn, then []byte) error {
	defer handshakeDeadline(ctx, conn)()
	if _, err := conn.Write(append(handshakeMAC(h.key, h.pr.host, h.nonceA, h.nonceH, h.pr.binding), then...)); err != nil {
		return handshakeErr(ctx, err)
	}
	var ok [1]byte
	if _, err := io.ReadFull(conn, ok[:]); err != nil {
		return handshakeErr(ctx, err)
	}
	if ok[0] != handshakeOK {
		return fmt.Errorf("%w: the agent refused the host's proof: %w", ErrAuth, errdefs.ErrPermissionDenied)
	}
	return nil
}

func handshakeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("handshake: %w", ctx.Err())
	}
	// The connection's deadline is the context's when that is earlier, and
	// it can fire a moment before the context reports it.
	if d, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
		return fmt.Errorf("handshake: %w", context.DeadlineExceeded)
	}
	return fmt.Errorf("handshake: %v: %w", err, errdefs.ErrUnavailable)
}

// AgentHandshake is the agent's side of the handshake on a connection it
// accepted. It returns ErrAuth when the peer does not prove key.
func AgentHandshake(conn net.Conn, key []byte) error {
	conn.SetDeadline(time.Now().Add(HandshakeTimeout))
	defer conn.SetDeadline(time.Time{})
	hello := make([]byte, len(handshakeMagic)+nonceSize)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return fmt.Errorf("%w: %v", ErrAuth, err)
	}
	if string(hello[:len(handshakeMagic)]) != handshakeMagic {
		return fmt.Errorf("%w: no handshake", ErrAuth)
	}
	return agentProve(conn, key, hello[len(handshakeMagic):], unbound)
}

// AgentAccept is the agent's side of the handshake on a connection it
// accepted, plain or sealed as the host asked (sealed.go). It returns the
// connection to serve: conn itself, or conn wrapped in the sealed layer.
func AgentAccept(conn net.Conn, key []byte) (net.Conn, error) {
	conn.SetDeadline(time.Now().Add(HandshakeTimeout))
	defer conn.SetDeadline(time.Time{})
	hello := make([]byte, len(handshakeMagic)+nonceSize)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	nonceH := hello[len(handshakeMagic):]
	switch string(hello[:len(handshakeMagic)]) {
	case handshakeMagic:
		if err := agentProve(conn, key, nonceH, unbound); err != nil {
			return nil, err
		}
		return conn, nil
	case sealedMagic:
		nonceA, err := agentProveNonce(conn, key, nonceH, sealedProofs)
		if err != nil {
			return nil, err
		}
		return newSealedConn(conn, key, nonceH, nonceA, false)
	}
	return nil, fmt.Errorf("%w: no handshake", ErrAuth)
}

// agentProve is the agent's side of the handshake once it read the
// host's hello (whose magic chose pr) and its nonce nonceH: it proves key
// and checks the host's proof.
func agentProve(conn net.Conn, key, nonceH []byte, pr proofs) error {
	_, err := agentProveNonce(conn, key, nonceH, pr)
	return err
}

// agentProveNonce is agentProve that returns the agent's nonce.
func agentProveNonce(conn net.Conn, key, nonceH []byte, pr proofs) ([]byte, error) {
	reply := make([]byte, 0, len(handshakeMagic)+nonceSize+macSize)
	reply = append(reply, pr.magic...)
	nonceA := make([]byte, nonceSize)
	rand.Read(nonceA)
	reply = append(reply, nonceA...)
	reply = append(reply, handshakeMAC(key, pr.agent, nonceH, nonceA, pr.binding)...)
	if _, err := conn.Write(reply); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	proof := make([]byte, macSize)
	if _, err := io.ReadFull(conn, proof); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	if !hmac.Equal(proof, handshakeMAC(key, pr.host, nonceA, nonceH, pr.binding)) {
		conn.Write([]byte{handshakeRefused})
		return nil, fmt.Errorf("%w: the peer does not hold the key", ErrAuth)
	}
	if _, err := conn.Write([]byte{handshakeOK}); err != nil {
		return nil, err
	}
	return nonceA, nil
}
