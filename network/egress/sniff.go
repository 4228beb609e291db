package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// originalDst returns where the sandbox meant to connect before the
// kernel redirected the connection to the proxy (SO_ORIGINAL_DST, IPv4).
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var ap netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		// The kernel fills a sockaddr_in; IPv6Mreq is just a 20-byte
		// buffer for it: family (2), port (2, big endian), address (4).
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		b := m.Multiaddr
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), uint16(b[2])<<8|uint16(b[3]))
	})
	if err == nil {
		err = serr
	}
	return ap, err
}

// What the first bytes of a connection are.
type kind int

const (
	kindOther kind = iota // unknown protocol, or nothing sent in time
	kindTLS
	kindHTTP
)

// Bounds of what the proxy reads before it decides.
const (
	peekBuffer = 32 << 10 // a TLS ClientHello record fits (max 16 KiB + header)
	maxHead    = 16 << 10 // an HTTP request head
)

// sniff reads (without consuming) the start of what the sandbox sends:
// a TLS ClientHello (and its SNI) or an HTTP request head (and its Host).
// It waits at most until deadline for the first bytes.
func sniff(c net.Conn, br *bufio.Reader, deadline time.Time) (kind, string) {
	c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	first, err := br.Peek(1)
	if err != nil || len(first) == 0 {
		return kindOther, ""
	}
	if first[0] == 0x16 { // TLS handshake record
		hdr, err := br.Peek(5)
		if err != nil {
			return kindOther, ""
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		rec, err := br.Peek(5 + n)
		if err != nil {
			return kindTLS, ""
		}
		name, _ := serverName(rec)
		return kindTLS, name
	}
	if !looksLikeHTTP(br) {
		return kindOther, ""
	}
	for {
		b, _ := br.Peek(br.Buffered())
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 && i+4 <= maxHead {
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:i+4])))
			if err != nil {
				return kindOther, ""
			}
			return kindHTTP, req.Host
		}
		if len(b) >= maxHead {
			return kindOther, "" // too long a head
		}
		// Wait for at least one more byte (one read), not for a full buffer.
		if _, err := br.Peek(len(b) + 1); err != nil {
			return kindOther, ""
		}
	}
}

var methods = []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "}

func looksLikeHTTP(br *bufio.Reader) bool {
	b, _ := br.Peek(8)
	s := string(b)
	for _, m := range methods {
		if strings.HasPrefix(s, m) {
			return true
		}
	}
	return false
}

var errSniffed = errors.New("sniffed")

// serverName parses a ClientHello with crypto/tls itself (through a
// handshake that stops at the hello) and returns its SNI.
func serverName(record []byte) (string, bool) {
	var name string
	var ok bool
	conf := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, ok = h.ServerName, true
		return nil, errSniffed
	}}
	tls.Server(readOnlyConn{r: bytes.NewReader(record)}, conf).Handshake()
	return name, ok
}

// readOnlyConn feeds bytes to a tls.Conn and swallows what it writes.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(p []byte) (int, error)         { return c.r.Read(p) }
func (c readOnlyConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c readOnlyConn) Close() error                       { return nil }
func (c readOnlyConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c readOnlyConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c readOnlyConn) SetDeadline(t time.Time) error      { return nil }
func (c readOnlyConn) SetReadDeadline(t time.Time) error  { return nil }
func (c readOnlyConn) SetWriteDeadline(t time.Time) error { return nil }

// prefixConn reads prefix before the connection's own bytes: what the
// proxy peeked is replayed to the TLS server or the upstream.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func withPrefix(c net.Conn, prefix []byte) net.Conn {
	return &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(prefix), c)}
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// keepAlive turns on TCP keepalives, so a spliced connection whose peer
// vanished is noticed without an idle timeout that would cut long-lived
// ones (SSH, websockets).
func keepAlive(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Minute, Interval: 15 * time.Second, Count: 4})
	}
}
