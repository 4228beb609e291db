package stack

import (
	"strings"
	"testing"

	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
)

// newImageProvider is newProvider whose sandboxes run on the default
// Debian image (the tests' shared, cached build) instead of the host.
func newImageProvider(t *testing.T, kind string, st *Stack) *local.Provider {
	t.Helper()
	images, _ := debiantest.Default(t)
	return localtest.New(t, local.Config{Runtime: kind, Networks: st, Images: images})
}

// TestImageEgress is the heart of TestSandboxEgress on the default Debian
// image rather than the host's root: the allowlist holds, and a secret
// reaches its server from curl, Python and Node, which trust the
// sandbox's CA through the image's own trust store (and the variables
// that point at it), while the image's public roots stay trusted.
func TestImageEgress(t *testing.T) {
	e := newEnv(t, 1)
	const value = "sk-live-IMAGE-0123456789"
	sec := e.addSecret("t1", "api-token", "API_TOKEN", []string{"api.example.test"}, value)
	pol := &policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test"), Secrets: []string{"api-token"}}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			p := newImageProvider(t, kind, e.st)
			sb := create(t, p, "t1", pol)
			cases := []struct {
				name, cmd string
				ok        bool
				want, not string
			}{
				// Debian's base-files makes /usr/local/games; the host's
				// root has no /usr/local.
				{"the image's root", "getent passwd 1000; ls /usr/local | grep -x games", true, "user:x:1000:1000:user:/home/user:/bin/bash\ngames", ""},
				{"domain allowed", "curl -sS -m 20 http://www.example.test/hello", true, `"Path":"/hello"`, ""},
				{"domain not allowed", "curl -sS -m 20 http://other.test/x", false, "", `"Path"`},
				// The image's bundle plus the sandbox's CA: Debian's roots
				// number over a hundred.
				{"trust store keeps the image's roots", "test $(grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt) -gt 100 && echo many", true, "many", ""},
				{"CA variables", "echo $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE", true, "/etc/ssl/certs/ca-certificates.crt", ""},
				{"placeholder in the environment", "printenv API_TOKEN", true, sec.Placeholder(), ""},
				{"secret injected (curl)", `curl -sS -m 20 -H "Authorization: Bearer $API_TOKEN" https://api.example.test/curl`, true, `"Path":"/curl"`, ""},
				{"secret injected (python)", `python3 -c "
import os, urllib.request
r = urllib.request.Request('https://api.example.test/python', headers={'Authorization': 'Bearer ' + os.environ['API_TOKEN']})
print(urllib.request.urlopen(r, timeout=20).read().decode())"`, true, `"Path":"/python"`, ""},
				{"secret injected (node)", `node -e "fetch('https://api.example.test/node', {headers: {authorization: 'Bearer ' + process.env.API_TOKEN}}).then(r => r.text()).then(console.log, e => { console.error(e); process.exit(1) })"`, true, `"Path":"/node"`, ""},
				{"value in no file", "grep -rsl " + value + " /etc /home /tmp /opt /run; cat /proc/self/environ | tr '\\0' '\\n' | grep -c " + value, false, "", ""},
			}
			for _, c := range cases {
				out, code := sh(t, sb, c.cmd)
				if (code == 0) != c.ok || !strings.Contains(out, c.want) || (c.not != "" && strings.Contains(out, c.not)) {
					t.Errorf("%s: exit %d, output:\n%s", c.name, code, out)
				}
				if strings.Contains(out, value) {
					t.Errorf("%s: the secret's value reached the sandbox:\n%s", c.name, out)
				}
				if strings.HasPrefix(c.name, "secret injected") {
					path := "/" + strings.TrimSuffix(strings.TrimPrefix(c.name, "secret injected ("), ")")
					if seen := e.world.Last("web:443"); seen.Path != path || seen.Auth != "Bearer "+value {
						t.Errorf("%s: the server saw %q %q, want the value", c.name, seen.Path, seen.Auth)
					}
				}
			}
		})
	}
	if strings.Contains(e.logs.String(), value) {
		t.Error("the secret's value is in the logs")
	}
}
