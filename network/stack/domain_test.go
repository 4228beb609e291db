package stack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestE2BDomain runs the official E2B JS SDK (e2e/e2b/domain.mjs) with no
// sandbox URL: the create returns the daemon's domain, so the SDK reaches
// envd at https://49983-<id>.sandlot.localhost, which is the daemon's
// handler behind TLS on 127.0.0.1:443 of the test's private namespace (the
// SDK uses https for that form), with a test CA the SDK trusts through
// NODE_EXTRA_CA_CERTS.
func TestE2BDomain(t *testing.T) {
	e := newEnv(t, 0)
	d := newDaemon(t, e, "crun")
	node := testenv.RequireBinary(t, "node")
	dir, err := filepath.Abs("../../e2e/e2b")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireFile(t, filepath.Join(dir, "node_modules/e2b/package.json")) // npm ci in e2e/e2b (scripts/deps.sh)
	cert, caPEM := domainCert(t, "*.sandlot.localhost")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp4", "127.0.0.1:443", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "domain.mjs")
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "E2B_API_KEY="+e2bKey, "E2B_API_URL=http://"+d.addr, "NODE_EXTRA_CA_CERTS="+caFile)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("node domain.mjs: %v\n%s", err, out)
	}
}

// domainCert returns a certificate for name signed by a fresh CA, and the
// CA's PEM.
func domainCert(t *testing.T, name string) (tls.Certificate, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "domain test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{name}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}
