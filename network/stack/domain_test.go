package stack

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/nettest"
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
	sdkDir(t)
	cert, caPEM := nettest.ServerCert(t, "*.sandlot.localhost")
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

	mustRunSDK(t, "domain.mjs", 4*time.Minute, "E2B_API_KEY="+e2bKey, "E2B_API_URL=http://"+d.addr, "NODE_EXTRA_CA_CERTS="+caFile)
}
