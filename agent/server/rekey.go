package server

import (
	"bytes"
	"net"
	"sync"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// Rekeying (agent.MethodRekey). A fork with memory restores the source's
// whole kernel, this agent and the key it read at boot included, into
// another sandbox: until the host gives it the fork's own key, the fork's
// agent would accept the source's, and the source's the fork's. The host
// rekeys the fork over the first session it opens to it, a sealed one,
// before the fork serves anything (provider/local fork.go).

// keyBox is the agent's current key.
type keyBox struct {
	mu  sync.Mutex
	key []byte
}

// key is the key a new connection must prove (nil: none asked).
// A copy: the box's own is zeroed when replaced.
func (s *Server) key() []byte {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if s.keys.key == nil {
		return nil
	}
	return bytes.Clone(s.keys.key)
}

// replace makes key the box's key and zeroes the one it had: after a
// fork's rekey the source's key stays nowhere in the fork's agent (the
// server's Config.Key, which the box's first key is, included).
// Precondition: b.mu held.
func (b *keyBox) replace(key []byte) {
	clear(b.key)
	b.key = append([]byte(nil), key...)
}

// rekey replaces the key, asked over conn: only a sealed session may, on
// an agent that has a key (not a pod's, whose keys come by enrollment).
// Connections already open keep going; new ones must prove key.
func (s *Server) rekey(conn net.Conn, key []byte) error {
	if s.cfg.Listen != "" || s.cfg.Listener != nil {
		return errf(errdefs.CodeFailedPrecondition, "channel.rekey: a pod agent's keys come by enrollment")
	}
	if !agent.IsSealed(conn) {
		return errf(errdefs.CodePermissionDenied, "channel.rekey is only accepted over a sealed session")
	}
	if len(key) != agent.KeySize {
		return errf(errdefs.CodeInvalidArgument, "channel.rekey: the key is %d bytes, want %d", len(key), agent.KeySize)
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if s.keys.key == nil {
		return errf(errdefs.CodeFailedPrecondition, "channel.rekey: this agent checks no key")
	}
	s.keys.replace(key)
	return nil
}
