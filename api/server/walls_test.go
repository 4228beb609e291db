package server_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/audit"
)

// The tests in this file attack the walls of the API edge with what a
// sandbox can put in front of a caller. docs/security.md says what each
// wall is meant to stop.

// auditGuarded is GET /v1/audit's guard as serve wires it: the tenant's
// egress guard, which knows the tenant's stored secret values.
func auditGuarded(known ...string) func(*server.Config) {
	g, err := guard.New(guard.Config{Known: func(context.Context, string) ([]string, error) { return known, nil }})
	if err != nil {
		panic(err)
	}
	return func(c *server.Config) {
		c.GuardText = func(ctx context.Context, tenantID, _ string, s string) string { return g.Text(ctx, tenantID, s) }
	}
}

// TestWallAuditGuarded: names a sandbox chose (the DNS names it looked
// up, the hosts it connected to) and the errors of its contexts reach a
// caller of GET /v1/audit only through the egress guard: a card number
// in a label, a stored secret hex-encoded into a label, an address in an
// error. What the daemon itself wrote (the address it dialled, counts)
// stays. Before, the trail returned every name as the sandbox chose it.
func TestWallAuditGuarded(t *testing.T) {
	stored := "vault-Pa55phrase-991"
	e := newEnv(t, auditGuarded(stored))
	card := "4111-1111-1111-1111"
	leak := hex.EncodeToString([]byte(stored))
	e.Audit = append(e.Audit,
		audit.Event{ID: 1, TenantID: "tenant-a", ContextID: "c1", Kind: audit.KindNetDNS,
			Detail: map[string]string{"sandbox": "sb", "proto": "dns", "host": card + ".leak.test", "allowed": "false", "reason": "name not allowed"}},
		audit.Event{ID: 2, TenantID: "tenant-a", ContextID: "c1", Kind: audit.KindNetDNS,
			Detail: map[string]string{"sandbox": "sb", "proto": "dns", "host": leak + ".leak.test"}},
		audit.Event{ID: 3, TenantID: "tenant-a", ContextID: "c1", Kind: audit.KindNetConnection,
			Detail: map[string]string{"sandbox": "sb", "proto": "http", "host": "x." + card + ".leak.test", "addr": "203.0.113.5", "port": "80", "bytesUp": "12"}},
		audit.Event{ID: 4, TenantID: "tenant-a", ContextID: "c1", Kind: audit.KindContextTerminated,
			Detail: map[string]string{"reason": "error", "error": "agent: mail alice.walls@exemplar.ie failed"}},
	)
	w := e.do(t, req{method: "GET", path: "/v1/audit", key: e.KeyA})
	var l api.AuditList
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &l) != nil || len(l.Events) != 4 {
		t.Fatalf("GET /v1/audit: %d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	for _, v := range []string{card, leak, "alice.walls@exemplar.ie"} {
		if strings.Contains(body, v) {
			t.Errorf("the audit trail returned %q as the sandbox wrote it: %s", v, body)
		}
	}
	conn := l.Events[1].Detail
	if conn["addr"] != "203.0.113.5" || conn["port"] != "80" || conn["bytesUp"] != "12" || !strings.HasSuffix(conn["host"], ".leak.test") {
		t.Errorf("the daemon's own fields changed: %+v", conn)
	}
}
