package stack

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store"
	storeaudit "github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// The tests in this file attack the walls of the daemon's sandbox
// networking as a hostile tenant would, from inside its sandboxes: what
// they send must not reach another tenant's share of the daemon (its
// audit trail), nor leave past the egress guard. docs/security.md says
// what each wall is meant to stop.

// auditPath is the daemon's path from the stack's events to the store's
// audit trail, as serve wires it (StoreEvent into the store's
// audit.Writer), on a real Postgres store.
func auditPath(t *testing.T) (AuditFunc, store.Backend) {
	t.Helper()
	t.Setenv("SANDLOT_TEST_POSTGRES", nettest.PostgresURL(t)) // the machine's server, from this namespace
	st, err := postgres.Open(context.Background(), pgtest.SchemaURL(t), postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := storeaudit.NewWriter(st, storeaudit.WriterConfig{})
	t.Cleanup(func() {
		w.Close(context.Background())
		st.Close()
	})
	return func(ev audit.Event, contextID string) { w.Add(StoreEvent(ev, contextID)) }, st
}

// TestWallDNSFlood: one tenant's sandbox floods the resolver with
// questions while another tenant's sandbox makes 20 lookups; every one
// of the other tenant's lookups is in the audit trail. On the code with
// one queue for all tenants and one INSERT per event, the flood filled
// the queue and the other tenant's events were dropped.
func TestWallDNSFlood(t *testing.T) {
	var fwd atomic.Pointer[AuditFunc]
	var seenA atomic.Int64
	e := newEnvWith(t, 0, func(cfg *Config) {
		cfg.Audit = func(ev audit.Event, contextID string) {
			if ev.Tenant == "tenant-a" {
				seenA.Add(1)
			}
			if f := fwd.Load(); f != nil {
				(*f)(ev, contextID)
			}
		}
	})
	path, st := auditPath(t)
	fwd.Store(&path)
	ctx := context.Background()
	pol := policy.Policy{Mode: policy.Allowlist, Allow: rules("example.org")}
	na, _, err := e.st.Setup(ctx, "sb-flood", "tenant-a", "ctx-a", pol)
	if err != nil {
		t.Fatal(err)
	}
	nb, _, err := e.st.Setup(ctx, "sb-quiet", "tenant-b", "ctx-b", pol)
	if err != nil {
		t.Fatal(err)
	}

	// Tenant A: fire-and-forget questions from 8 sockets, as fast as the
	// sandbox can send them, until B is done.
	stop := make(chan struct{})
	var sent, answered atomic.Int64
	var flood sync.WaitGroup
	for w := range 8 {
		c, err := netns.Dialer(na.Path)(ctx, "udp4", nettest.DNSAddr.String())
		if err != nil {
			t.Fatal(err)
		}
		flood.Add(2)
		go func() { // drain the answers, so the sandbox's socket never fills
			defer flood.Done()
			buf := make([]byte, 1500)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
				answered.Add(1)
			}
		}()
		go func() {
			defer flood.Done()
			defer c.Close()
			q := new(dns.Msg)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q.SetQuestion(fmt.Sprintf("f%d-%d.flood.test.", w, i), dns.TypeA)
				b, _ := q.Pack()
				if _, err := c.Write(b); err == nil {
					sent.Add(1)
				}
			}
		}()
	}
	defer func() { close(stop); flood.Wait() }()
	// Under way: the resolver has answered (and so reported) 20000 of
	// them, five times what the daemon's audit queue held.
	waitUntil(t, "the flood to be under way", 120*time.Second, func() bool { return answered.Load() >= 20000 })

	// Tenant B: 20 lookups over TCP (the flood fills the resolver's UDP
	// socket, where the kernel drops datagrams of every sender alike),
	// each asked again until answered.
	underWay := time.Now()
	for i := range 20 {
		name := fmt.Sprintf("b%d.quiet.test", i)
		waitUntil(t, "an answer to "+name, 60*time.Second, func() bool { return lookupFrom(nb.Path, name) })
	}
	t.Logf("tenant B's lookups took %s; tenant A sent %d questions, %d were answered, %d events reached the audit path",
		time.Since(underWay).Round(time.Millisecond), sent.Load(), answered.Load(), seenA.Load())
	close(stop)
	flood.Wait()
	stop = make(chan struct{})

	want := map[string]bool{}
	for i := range 20 {
		want[fmt.Sprintf("b%d.quiet.test", i)] = true
	}
	missing := func() []string {
		evs, err := st.ListAudit(ctx, "tenant-b", 1000)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, ev := range evs {
			seen[ev.Detail["host"]] = true
		}
		var out []string
		for h := range want {
			if !seen[h] {
				out = append(out, h)
			}
		}
		return out
	}
	// The trail is written behind the connections: wait for it to drain.
	var m []string
	deadline := time.Now().Add(60 * time.Second)
	for m = missing(); len(m) > 0 && time.Now().Before(deadline); m = missing() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(m) > 0 {
		t.Fatalf("tenant B's lookups missing from the audit trail after tenant A's flood: %d of 20 (%s)", len(m), strings.Join(m, ", "))
	}
}

// lookupFrom asks name once over TCP from inside the namespace at path
// and reports whether an answer came.
func lookupFrom(path, name string) bool {
	c, err := netns.Dialer(path)(context.Background(), "tcp4", nettest.DNSAddr.String())
	if err != nil {
		return false
	}
	defer c.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	_, _, err = (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).ExchangeWithConn(q, &dns.Conn{Conn: c})
	return err == nil
}

// waitUntil polls cond every 20 ms until it holds, failing t after
// bound.
func waitUntil(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", bound, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// servedGuard is the egress guard as serve composes it when networks are
// on: the guard knows the values of the tenants' stored secrets.
func servedGuard(t *testing.T, e *env) contexts.Guard {
	t.Helper()
	g, err := guard.New(guard.Config{Known: func(ctx context.Context, tenantID string) ([]string, error) {
		ss, err := e.lookupSecrets(ctx, tenantID, nil)
		vals := make([]string, len(ss))
		for i, s := range ss {
			vals[i] = s.Value
		}
		return vals, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestWallStoredSecretEncoded: a sandbox that holds one of its tenant's
// stored secret values writes it out encoded (base64 at two alignments,
// hex, URL and JSON escaping), in a result, in output split across
// writes, in a file read whole, and in one downloaded in 1 MiB chunks
// with the hex form across the chunks' boundary; none of the forms
// leaves. Before, the stored values were masked by a plain replace
// of the raw value in front of the guard, and every encoded form got out.
func TestWallStoredSecretEncoded(t *testing.T) {
	e := newEnv(t, 0)
	value := `vault"Pa55/phrase+` + fmt.Sprintf("%x", time.Now().UnixNano()) // made at test time; no detector knows it
	e.addSecret("t1", "VAULT", "VAULT_TOKEN", []string{"api.example.test"}, value)
	forms := map[string]string{
		"raw":       value,
		"base64":    base64.StdEncoding.EncodeToString([]byte("x" + value)),
		"base64-2":  base64.StdEncoding.EncodeToString([]byte("ab" + value)),
		"hex":       hex.EncodeToString([]byte(value)),
		"url":       url.QueryEscape(value),
		"json":      strings.Trim(string(must(json.Marshal(value))), `"`),
		"base64url": base64.RawURLEncoding.EncodeToString([]byte(value)),
	}
	m := contexts.NewManager(memory.New(), newProvider(t, "crun", e.st), contexts.Config{PoolSize: -1, Networks: e.st, Guard: servedGuard(t, e)})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}
	code := fmt.Sprintf(`import base64, json, sys, time, urllib.parse
v = %q
print("b64", base64.b64encode(b"x" + v.encode()).decode())
print("url", urllib.parse.quote_plus(v), "json", json.dumps(v)[1:-1], "b64url", base64.urlsafe_b64encode(v.encode()).decode().rstrip("="))
h = v.encode().hex()
sys.stdout.write("split " + h[:9]); sys.stdout.flush(); time.sleep(0.05)
sys.stdout.write(h[9:] + "\n"); sys.stdout.flush()
open("/tmp/small.txt", "w").write("file " + h + " " + base64.b64encode(b"x" + v.encode()).decode() + "\n")
open("/tmp/leak.txt", "w").write(("z" * 99 + "\n") * 10485 + "z" * 50 + " file " + h + " " + base64.b64encode(b"x" + v.encode()).decode() + "\n")
base64.b64encode(b"ab" + v.encode()).decode()
`, value)
	var streamed strings.Builder
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: code}, func(ev agent.OutputEvent) {
		streamed.WriteString(ev.Data)
	})
	if err != nil || res.Error != nil {
		t.Fatalf("run: %+v %v", res, err)
	}
	out := map[string]string{"streamed": streamed.String(), "stdout": res.Stdout}
	for _, r := range res.Results {
		out["result"] += r.Text
	}
	err = m.Use(ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		r, err := sb.ReadFile(ctx, agent.ReadParams{Path: "/tmp/small.txt"})
		if err != nil {
			return err
		}
		out["file"] = string(r.Data)
		var dl strings.Builder
		err = contexts.ReadFile(ctx, sb, "/tmp/leak.txt", func(c contexts.FileChunk) error { dl.Write(c.Data); return nil })
		out["download"] = dl.String()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out["stdout"], "split ") || !strings.Contains(out["download"], "file ") || out["result"] == "" {
		t.Fatalf("the program did not run as meant: %q", out)
	}
	for where, s := range out {
		for form, f := range forms {
			if strings.Contains(s, f) {
				t.Errorf("the stored secret left in %s as %s", where, form)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
