package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
)

// TestServeTLS: with --tls-addr, --tls-cert and --tls-key the front door
// also answers over TLS with the operator's certificate (a client that
// trusts its CA gets /healthz; one that does not fails the handshake),
// while the plain listener keeps serving. Half a TLS configuration, or a
// pair that does not load, is refused before anything listens.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	cert, caPEM := nettest.ServerCert(t, "*.sandlot.localhost")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func(ctx context.Context, name string, out *testenv.Buffer, extra ...string) error {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--data-dir", filepath.Join(dir, name),
			"--state-dir", filepath.Join(dir, name+"-run"), "--pool-size", "0", "--providers", "local", "--log-level", "error", "--default-image", "none"}, extra...)
		return Run(ctx, args, strings.NewReader(""), out, out)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"addr without a pair", []string{"--tls-addr", "127.0.0.1:0"}, "--tls-addr needs --tls-cert and --tls-key"},
		{"pair without addr", []string{"--tls-cert", certFile, "--tls-key", keyFile}, "need --tls-addr"},
		{"key that is not one", []string{"--tls-addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", certFile}, "--tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out testenv.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := serve(ctx, "bad", &out, tc.args...)
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve %v: %v, want invalid_argument %q\n%s", tc.args, err, tc.want, out.String())
			}
			if strings.Contains(out.String(), "listening") {
				t.Fatal("serve listened")
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, "ok", &out, "--tls-addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	}()
	var tlsURL, plainURL string
	for deadline := time.Now().Add(60 * time.Second); plainURL == ""; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", out.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if u, ok := strings.CutPrefix(l, "sandlot listening with TLS on "); ok {
				tlsURL = u
			} else if u, ok := strings.CutPrefix(l, "sandlot listening on "); ok {
				plainURL = u
			}
		}
	}
	if !strings.HasPrefix(tlsURL, "https://127.0.0.1:") {
		t.Fatalf("TLS listener %q:\n%s", tlsURL, out.String())
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := trusting.Get(tlsURL + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("GET /healthz over TLS: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	stranger := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
	if resp, err := stranger.Get(tlsURL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("a client without the CA completed the handshake")
	}
	if resp, err := http.Get(plainURL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain listener: %v %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("serve: %v", err)
	}
}
