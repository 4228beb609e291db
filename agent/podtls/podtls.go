// Package podtls is the TLS of the pod channel (agent/channel.go): the
// agent's ephemeral certificate, TLS 1.3 on both sides, and the session's
// exported keying material that the channel's bound handshake covers.
//
// It is a package of its own so that the local agent, which serves a unix
// socket and never speaks TLS, links none of crypto/tls and crypto/x509:
// their packages' init and data cost every sandbox's agent ~2 ms of CPU at
// start and ~0.15 MiB of memory (docs/decisions/agent-binaries.md). The pod
// agent (cmd/sandlot-pod-agent) and the host (agent/podchannel) use it.
package podtls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// exporterLabel names the keying material the channel's MACs cover.
const exporterLabel = "EXPORTER-sandlot-agent-channel"

// Conn is a TLS connection of the pod channel. It is an agent.BoundConn:
// Binding is the session's exported keying material (RFC 8446 §7.5).
type Conn struct{ *tls.Conn }

// Binding is the session's exported keying material; an error when the
// session is not TLS 1.3.
func (c Conn) Binding() ([]byte, error) {
	cs := c.ConnectionState()
	if cs.Version != tls.VersionTLS13 {
		return nil, fmt.Errorf("TLS version %x, want 1.3", cs.Version)
	}
	return cs.ExportKeyingMaterial(exporterLabel, nil, 32)
}

// newCertificate makes the agent's ephemeral, self-signed certificate.
// Nobody verifies it: the bound handshake authenticates.
func newCertificate() (tls.Certificate, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "sandlot-agent"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}

// NewServer makes a certificate and returns what wraps each connection
// the agent accepts in the server side of TLS with it: TLS 1.3 only (its
// exporter is what the binding needs).
func NewServer() (func(net.Conn) Conn, error) {
	cert, err := newCertificate()
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}
	return func(c net.Conn) Conn { return Conn{tls.Server(c, conf)} }, nil
}

// clientConfig is the host's: TLS 1.3 only, and no verification of the
// agent's certificate, which is ephemeral by design; the bound handshake
// that follows proves the peer holds the key.
func clientConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
}

// Dial connects to addr and completes TLS as the client. A failed connect
// is unavailable (errdefs), or ctx's error when ctx ended.
func Dial(ctx context.Context, addr string) (Conn, error) {
	d := tls.Dialer{Config: clientConfig()}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return Conn{}, fmt.Errorf("dial agent %s: %w", addr, ctx.Err())
		}
		return Conn{}, fmt.Errorf("dial agent %s: %w: %w", addr, err, errdefs.ErrUnavailable)
	}
	return Conn{c.(*tls.Conn)}, nil
}
