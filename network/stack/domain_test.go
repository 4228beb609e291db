package stack

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
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
	node := testenv.RequireBinary(t, "node")
	dir, err := filepath.Abs("../../e2e/e2b")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireFile(t, filepath.Join(dir, "node_modules/e2b/package.json")) // npm ci in e2e/e2b (scripts/deps.sh)
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
