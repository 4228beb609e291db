package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/network/policy"
)

// TestTenantSecrets: a policy that names no secret gets every secret of
// its tenant (placeholders in the environment, values injected for their
// hosts); a changed value is used after RefreshSecrets, a deleted secret
// is no longer injected; another tenant's secret is never offered.
func TestTenantSecrets(t *testing.T) {
	e := newEnv(t, 0)
	sec := e.addSecret("t2", "api", "API_TOKEN", []string{"api.example.test"}, "first-value-0001")
	e.addSecret("t3", "other", "OTHER_TOKEN", []string{"api.example.test"}, "other-tenant-0001")
	p := newProvider(t, "crun", e.st)
	sb := create(t, p, "t2", &policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")})
	// -k: without secrets the proxy splices, and the fake world's server
	// certificate is not in the sandbox's store (trust is TestSandboxEgress's).
	call := `curl -k -sS -m 20 -H "Authorization: Bearer $API_TOKEN" https://api.example.test/t; printenv OTHER_TOKEN; true`
	check := func(want string) {
		t.Helper()
		out, _ := sh(t, sb, call)
		seen := e.world.Last("web:443")
		if seen.Auth != "Bearer "+want || strings.Contains(out, "first-value") || strings.Contains(out, "second-value") || strings.Contains(out, "other-tenant") {
			t.Errorf("server saw %q, want %q; sandbox output:\n%s", seen.Auth, want, out)
		}
	}
	check("first-value-0001")
	e.addSecret("t2", "api", "API_TOKEN", []string{"api.example.test"}, "second-value-0002")
	e.st.RefreshSecrets(context.Background(), "t2")
	check("second-value-0002")
	e.mu.Lock()
	delete(e.secrets, "t2/api")
	e.mu.Unlock()
	e.st.RefreshSecrets(context.Background(), "t2")
	check(sec.Placeholder())
}
