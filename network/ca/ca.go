// Package ca is a sandbox's own certificate authority. The egress proxy
// terminates TLS to the hosts that get secrets injected, presenting a leaf
// certificate this CA signs; the sandbox trusts the CA (its certificate is
// placed in the sandbox's trust store) and nothing else does, so a CA that
// leaks from one sandbox is worth nothing anywhere else.
package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// Lifetimes. A leaf is short-lived and re-minted before it expires; the CA
// outlives any sandbox.
const (
	DefaultValidity = 5 * 365 * 24 * time.Hour
	leafValidity    = 7 * 24 * time.Hour
	leafRenew       = time.Hour
	maxLeaves       = 256
)

// CA signs leaf certificates for the names a sandbox connects to.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by name; at most maxLeaves
}

// New generates a CA (ECDSA P-256) named after the sandbox (which may be
// unknown yet: "").
func New(sandboxID string, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		validity = DefaultValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"sandlot"}, CommonName: strings.TrimSpace("sandlot sandbox " + sandboxID)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("ca: create: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), leaves: map[string]*tls.Certificate{}}, nil
}

// Parse loads a CA saved with CertPEM and KeyPEM.
func Parse(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("ca: no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca: certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca: key: %w", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("ca: the key does not belong to the CA certificate")
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(cb), leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA certificate, for the sandbox's trust store.
func (c *CA) CertPEM() []byte { return c.certPEM }

// Certificate is the parsed CA certificate.
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// KeyPEM is the CA's private key (SEC 1, PEM). It never goes into a
// sandbox; the daemon keeps it to survive restarts.
func (c *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Leaf returns a certificate for name (a host name or an IP literal),
// minting one if none is cached or the cached one is about to expire.
func (c *CA) Leaf(name string) (*tls.Certificate, error) {
	if name == "" {
		return nil, errors.New("ca: no name for the leaf certificate")
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leaves[name]; ok && l.Leaf.NotAfter.Sub(now) > leafRenew {
		return l, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafValidity)
	if notAfter.After(c.cert.NotAfter) {
		notAfter = c.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("ca: leaf for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key, Leaf: leaf}
	if len(c.leaves) >= maxLeaves {
		for k := range c.leaves { // drop an arbitrary one: a cache, not a record
			delete(c.leaves, k)
			break
		}
	}
	c.leaves[name] = l
	return l, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}
