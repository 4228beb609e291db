package agent

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// A sealed session is the unix-socket handshake followed by a stream in
// which every byte is encrypted and authenticated with keys derived from
// the handshake. The handshake proves that the key's holder answered; it
// does not prove that the bytes after it come from that holder: a process
// that sits between the two ends (a relay that took the socket's name
// while the channel directory was open, docs/security-walls-sandbox.md) forwards both
// proofs and may then read, drop, forge or inject messages. A sealed
// session leaves such a relay nothing but dropping them.
//
// The host asks for it (ClientConfig.Sealed) where the channel cannot be
// trusted to reach the agent itself: a sandbox whose channel directory
// was reopened by a restore. Elsewhere the runtime guarantees the channel
// (docs/security-walls-sandbox.md, wall 2) and the session stays plain, which keeps the
// cost off the warm path; the agent accepts both.
//
// The handshake is that of handshake.go with its own magic and roles, so
// a proof made for one kind never checks as the other (a relay cannot turn
// a sealed session into a plain one). Then each direction has its own
// AES-256-GCM key, HKDF-SHA256 of the sandbox key with both nonces as the
// salt, and counts its records from 0 as the GCM nonce. A record is
//
//	length (4 bytes, big endian, of what follows), ciphertext || tag
//
// with the length as additional data. A record that does not open (a
// byte changed, a record dropped, reordered or replayed, one from another
// session) ends the session: the read fails, and the Client fails every
// call pending on it as unavailable. The layer wraps a net.Conn, so the
// framing above it (frame.go, the agent's conn.go) is the same on both
// kinds of session.
const (
	sealedMagic = "SLA2"
	// maxRecordPlain bounds the plaintext of one record; a Write of more
	// is split.
	maxRecordPlain = 64 << 10
	sealedInfoH2A  = "sandlot agent channel v2: host to agent"
	sealedInfoA2H  = "sandlot agent channel v2: agent to host"
)

// sealedProofs is the handshake of a sealed session.
var sealedProofs = proofs{magic: sealedMagic, agent: "agent-sealed", host: "host-sealed"}

// errSealed marks a record that failed to open: the peer is not the other
// end of this session.
var errSealed = errors.New("sealed channel: a record failed authentication")

// sealedConn is a net.Conn whose bytes travel as sealed records.
type sealedConn struct {
	net.Conn

	rmu    sync.Mutex
	in     *bufio.Reader
	open   cipher.AEAD
	rseq   uint64
	rbuf   []byte // the record being opened
	plain  []byte // opened bytes not read yet
	rerr   error  // sticky: a stream that failed once is done
	rnonce [12]byte

	wmu    sync.Mutex
	seal   cipher.AEAD
	wseq   uint64
	wbuf   []byte
	wnonce [12]byte
}

// newSealedConn wraps c, whose handshake with key exchanged nonceH (the
// host's) and nonceA (the agent's); host says which end this is.
func newSealedConn(c net.Conn, key, nonceH, nonceA []byte, host bool) (*sealedConn, error) {
	salt := append(append(make([]byte, 0, 2*nonceSize), nonceH...), nonceA...)
	h2a, err := sessionAEAD(key, salt, sealedInfoH2A)
	if err != nil {
		return nil, err
	}
	a2h, err := sessionAEAD(key, salt, sealedInfoA2H)
	if err != nil {
		return nil, err
	}
	s := &sealedConn{Conn: c, in: bufio.NewReaderSize(c, 4<<10)}
	if host {
		s.seal, s.open = h2a, a2h
	} else {
		s.seal, s.open = a2h, h2a
	}
	return s, nil
}

func sessionAEAD(key, salt []byte, info string) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, key, salt, info, 32)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// nonce is record seq's GCM nonce, made in n (the caller's, which its
// lock guards: no allocation per record).
func (s *sealedConn) nonce(n *[12]byte, seq uint64) []byte {
	binary.BigEndian.PutUint64(n[4:], seq)
	return n[:]
}

// Write seals p into records and writes them in one write. n counts the
// bytes of p whose records were written whole: the peer can open no part
// of a record cut short.
func (s *sealedConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	buf := s.writeBuffer(len(p))
	for off := 0; off < len(p); {
		end := min(off+maxRecordPlain, len(p))
		start := len(buf)
		buf = binary.BigEndian.AppendUint32(buf, uint32(end-off+s.seal.Overhead()))
		buf = s.seal.Seal(buf, s.nonce(&s.wnonce, s.wseq), p[off:end], buf[start:start+4])
		s.wseq++
		off = end
	}
	w, err := s.Conn.Write(buf)
	if err == nil {
		return len(p), nil
	}
	// Every record but the last carries maxRecordPlain bytes of p.
	return w / (4 + maxRecordPlain + s.seal.Overhead()) * maxRecordPlain, err
}

// writeBuffer returns an empty buffer that holds the records of n bytes.
// The connection keeps it (s.wbuf) only up to one record's size: the host
// holds a client per restored sandbox, so a buffer kept after one large
// write would stay pinned for each of them; a larger write gets a buffer
// of its own, which goes with the write.
func (s *sealedConn) writeBuffer(n int) []byte {
	per := 4 + s.seal.Overhead()
	need := n + (n+maxRecordPlain-1)/maxRecordPlain*per
	if need <= cap(s.wbuf) {
		return s.wbuf[:0]
	}
	if record := maxRecordPlain + per; need <= record {
		s.wbuf = make([]byte, 0, min(record, max(need, 2*cap(s.wbuf), 512)))
		return s.wbuf
	}
	return make([]byte, 0, need)
}

// Read returns opened bytes; a record that fails to open ends the stream.
func (s *sealedConn) Read(p []byte) (int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for len(s.plain) == 0 {
		if s.rerr != nil {
			return 0, s.rerr
		}
		s.rerr = s.next()
	}
	n := copy(p, s.plain)
	s.plain = s.plain[n:]
	return n, nil
}

// next reads and opens one record into s.plain.
func (s *sealedConn) next() error {
	var hdr [4]byte
	if _, err := io.ReadFull(s.in, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: cut short", errSealed)
		}
		return err
	}
	size := int(binary.BigEndian.Uint32(hdr[:]))
	if size < s.open.Overhead() || size > maxRecordPlain+s.open.Overhead() {
		return fmt.Errorf("%w: a record of %d bytes", errSealed, size)
	}
	if cap(s.rbuf) < size {
		s.rbuf = make([]byte, size)
	}
	rec := s.rbuf[:size]
	if _, err := io.ReadFull(s.in, rec); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: %v", errSealed, err)
	}
	plain, err := s.open.Open(rec[:0], s.nonce(&s.rnonce, s.rseq), rec, hdr[:])
	if err != nil {
		return errSealed
	}
	s.rseq++
	s.plain = plain
	return nil
}

// IsSealed reports whether conn is the agent's end of a sealed session
// (AgentAccept of a sealed handshake).
func IsSealed(conn net.Conn) bool {
	_, ok := conn.(*sealedConn)
	return ok
}
