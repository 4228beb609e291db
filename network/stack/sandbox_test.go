package stack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
)

// TestSandboxEgress runs real sandboxes (provider/local on crun, runc and
// runsc) on an allowlist in front of the fake internet: what the policy
// allows by domain, address range and port is reached; everything else,
// the metadata address, the host's own addresses and private ranges are
// not, even when a rule names them; a secret's value reaches the server
// it is scoped to while the sandbox only ever holds its placeholder (its
// environment, its files, the responses it reads), with curl, Python and
// Node trusting the sandbox's CA; every connection is audited.
func TestSandboxEgress(t *testing.T) {
	e := newEnv(t, 1)
	const value = "sk-live-EDGE-0123456789"
	sec := e.addSecret("t1", "api-token", "API_TOKEN", []string{"api.example.test"}, value)
	host := hostServer(t)
	gw := e.st.Manager().Gateway()
	pol := &policy.Policy{
		Mode: policy.Allowlist,
		Allow: rules("*.example.test", "203.0.113.20:80", "169.254.169.254", "10.9.9.9",
			nettest.Uplink.String(), gw.String()),
		Deny:    rules("blocked.example.test"),
		Secrets: []string{"api-token"},
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			p := newProvider(t, kind, e.st)
			sb := create(t, p, "t1", pol)
			var outputs []string
			run := func(cmd string) (string, int) {
				out, code := sh(t, sb, cmd)
				outputs = append(outputs, out)
				return out, code
			}
			cases := []struct {
				name, cmd string
				ok        bool   // exit code 0
				want      string // in the output
				not       string // never in the output
			}{
				{"domain allowed", "curl -sS -m 20 http://www.example.test/hello", true, `"Path":"/hello"`, ""},
				{"domain not allowed: no answer", "getent hosts other.test", false, "", "203.0.113"},
				{"domain not allowed: by address", "curl -sS -m 20 -H 'Host: other.test' http://203.0.113.10/x", true, "egress denied", `"Path"`},
				{"deny rule wins over wildcard", "curl -sS -m 20 --resolve blocked.example.test:80:203.0.113.10 http://blocked.example.test/x", true, "egress denied", `"Path"`},
				{"denied name has no answer", "getent hosts blocked.example.test", false, "", "203.0.113"},
				{"address range allowed", "curl -sS -m 20 http://203.0.113.20/web2", true, `"Server":"web2:80"`, ""},
				// Every TCP connect succeeds (the proxy takes it), then the
				// proxy refuses and closes: nothing comes back.
				{"port outside the rule", "timeout 10 bash -c 'exec 3<>/dev/tcp/203.0.113.20/7 && echo ping >&3 && timeout 3 head -c4 <&3'; echo end", true, "end", "ping"},
				{"metadata, named by a rule", "curl -sS -m 20 http://169.254.169.254/latest/meta-data/", true, "egress denied", `"Server"`},
				{"private range, named by a rule", "curl -sS -m 20 http://10.9.9.9/", true, "egress denied", `"Server"`},
				{"host's uplink address, named by a rule", fmt.Sprintf("curl -sS -m 10 http://%s:%d/", nettest.Uplink, host), true, "egress denied: host address", "host-secret-page"},
				{"gateway address, named by a rule", fmt.Sprintf("curl -sS -m 10 http://%s:%d/", gw, host), true, "egress denied", "host-secret-page"},
				{"host's /sys network devices hidden", "ls /sys/class/net 2>&1 | grep -c sl-; echo end", true, "end", "sl-"},
				{"UDP beyond DNS", `python3 -c "
import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(b'ping', ('203.0.113.10', 9)); print(s.recv(10))"`, false, "", "b'ping'"},
				{"cannot change its network", "ip addr add 10.254.255.99/32 dev eth0", false, "", ""},
				{"placeholder in the environment", "printenv API_TOKEN", true, sec.Placeholder(), ""},
				{"secret injected (curl)", `curl -sS -m 20 -H "Authorization: Bearer $API_TOKEN" https://api.example.test/curl`, true, `"Auth":"Bearer ` + sec.Placeholder() + `"`, ""},
				{"secret injected (python)", `python3 -c "
import os, urllib.request
r = urllib.request.Request('https://api.example.test/python', headers={'Authorization': 'Bearer ' + os.environ['API_TOKEN']})
print(urllib.request.urlopen(r, timeout=20).read().decode())"`, true, `"Path":"/python"`, ""},
				{"secret injected (node)", `node -e "fetch('https://api.example.test/node', {headers: {authorization: 'Bearer ' + process.env.API_TOKEN}}).then(r => r.text()).then(console.log, e => { console.error(e); process.exit(1) })"`, true, `"Path":"/node"`, ""},
				{"secret not sent to another host", `curl -sS -m 20 -k -H "Authorization: Bearer $API_TOKEN" https://www.example.test/elsewhere`, true, `"Auth":"Bearer ` + sec.Placeholder() + `"`, ""},
				{"value in no file", "grep -rsl " + value + " /etc /home /tmp /opt /run; cat /proc/self/environ | tr '\\0' '\\n' | grep -c " + value, false, "", ""},
			}
			for _, c := range cases {
				out, code := run(c.cmd)
				if (code == 0) != c.ok || !strings.Contains(out, c.want) || (c.not != "" && strings.Contains(out, c.not)) {
					t.Errorf("%s: exit %d, output:\n%s", c.name, code, out)
				}
				switch c.name {
				case "secret injected (curl)", "secret injected (python)", "secret injected (node)":
					path := "/" + strings.TrimSuffix(strings.TrimPrefix(c.name, "secret injected ("), ")")
					if seen := e.world.Last("web:443"); seen.Path != path || seen.Auth != "Bearer "+value {
						t.Errorf("%s: the server saw %q %q, want the value", c.name, seen.Path, seen.Auth)
					}
				case "secret not sent to another host":
					if seen := e.world.Last("web:443"); seen.Path != "/elsewhere" || strings.Contains(seen.Auth, value) {
						t.Errorf("%s: the server saw %q %q", c.name, seen.Path, seen.Auth)
					}
				}
			}
			for _, s := range e.world.Seen() {
				if s.Server == "metadata:80" || s.Server == "private:80" {
					t.Errorf("a forbidden server was reached: %+v", s)
				}
			}
			for _, out := range outputs {
				if strings.Contains(out, value) {
					t.Errorf("the secret's value reached the sandbox:\n%s", out)
				}
			}
		})
	}
	if strings.Contains(e.logs.String(), value) {
		t.Error("the secret's value is in the logs")
	}
	var allowed, denied, injected int
	for _, ev := range e.auditEvents() {
		if fmt.Sprint(ev) != "" && strings.Contains(fmt.Sprintf("%+v", ev), value) {
			t.Errorf("the secret's value is in an audit event: %+v", ev)
		}
		if ev.Proto == audit.ProtoDNS {
			continue
		}
		if ev.Tenant != "t1" || ev.SandboxID == "" {
			t.Errorf("audit event without its sandbox: %+v", ev)
		}
		if ev.Allowed {
			allowed++
		} else {
			denied++
		}
		injected += ev.Injected
	}
	if allowed == 0 || denied == 0 || injected < len(kinds)*3 {
		t.Errorf("audit: %d allowed, %d denied, %d injected; want connections of both kinds and every injection", allowed, denied, injected)
	}
}

// hostServer serves a page on every address of the test's host namespace
// (the daemon's), which no sandbox may reach, and returns its port.
func hostServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "host-secret-page")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// TestNoNetworkByDefault: a sandbox that asks for no network keeps a
// loopback-only namespace of its own, on every runtime, while networks
// exist beside it.
func TestNoNetworkByDefault(t *testing.T) {
	e := newEnv(t, 0)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			p := newProvider(t, kind, e.st)
			sb := create(t, p, "t1", nil)
			out, _ := sh(t, sb, "cat /etc/resolv.conf; ip -o -4 addr; curl -sS -m 5 http://203.0.113.10/ 2>&1; echo done")
			if strings.Contains(out, "nameserver") || strings.Contains(out, "eth0") || strings.Contains(out, `"Server"`) || !strings.Contains(out, "done") {
				t.Errorf("a sandbox without a network sees one:\n%s", out)
			}
			if n := len(e.st.Manager().List()); n != 0 {
				t.Errorf("%d networks built for a sandbox that asked for none", n)
			}
		})
	}
	_ = context.Background
}
