package stack

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/audit"
	storeaudit "github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
)

// TestStoreEvent: a proxy event lands in the store's audit trail with its
// tenant, context, destination, bytes and verdict, and no payload; a
// question as network.dns; a count of suppressed events as
// network.limited.
func TestStoreEvent(t *testing.T) {
	st := memory.New()
	ctx := context.Background()
	ev := audit.Event{SandboxID: "sb-1", Tenant: "t1", Proto: audit.ProtoHTTP, Host: "pypi.org",
		Addr: netip.MustParseAddr("203.0.113.5"), Port: 80, BytesUp: 120, BytesDown: 4096,
		Allowed: false, Reason: "not in the allowlist", Start: time.Now(), Duration: 3 * time.Millisecond}
	if err := st.AppendAudit(ctx, StoreEvent(ev, "ctx-1")); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ListAudit(ctx, "t1", 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", evs, err)
	}
	got := evs[0]
	d := got.Detail
	if got.Kind != storeaudit.KindNetConnection || got.ContextID != "ctx-1" || d["host"] != "pypi.org" || d["addr"] != "203.0.113.5" ||
		d["port"] != "80" || d["allowed"] != "false" || d["bytesDown"] != "4096" || d["sandbox"] != "sb-1" {
		t.Errorf("audit event %+v", got)
	}
	dns := StoreEvent(audit.Event{Tenant: "t1", Proto: audit.ProtoDNS, Host: "x.test", Allowed: true}, "")
	if dns.Kind != storeaudit.KindNetDNS || dns.Detail["bytesUp"] != "" {
		t.Errorf("dns event %+v", dns)
	}
	lim := StoreEvent(audit.Event{SandboxID: "sb-1", Tenant: "t1", Proto: ProtoLimited, Suppressed: 7}, "ctx-1")
	if lim.Kind != storeaudit.KindNetLimited || lim.Detail["suppressed"] != "7" || lim.TenantID != "t1" || lim.Detail["sandbox"] != "sb-1" {
		t.Errorf("limited event %+v", lim)
	}
}

// TestAuditLimiter: a sandbox's events pass up to its burst, the rest
// are counted, and the count comes back once (with the next event let
// through, at teardown, or at close); another sandbox has its own rate.
func TestAuditLimiter(t *testing.T) {
	l := newAuditLimiter(0.001, 5) // a token every 1000 s: none refills during the test
	ev := audit.Event{SandboxID: "a", Tenant: "t1", Proto: audit.ProtoDNS}
	passed := 0
	for range 50 {
		if ok, sum := l.allow(ev); ok {
			passed++
			if sum != nil {
				t.Fatalf("a count before anything was suppressed: %+v", sum)
			}
		}
	}
	if passed != 5 {
		t.Fatalf("%d events passed, want the burst of 5", passed)
	}
	if ok, _ := l.allow(audit.Event{SandboxID: "b", Tenant: "t2"}); !ok {
		t.Fatal("another sandbox was limited by the first one's flood")
	}
	sums := l.flush()
	if len(sums) != 1 || sums[0].SandboxID != "a" || sums[0].Tenant != "t1" || sums[0].Suppressed != 45 || sums[0].Proto != ProtoLimited {
		t.Fatalf("flush = %+v", sums)
	}
	if l.flush() != nil {
		t.Fatal("a count was returned twice")
	}
	l.allow(ev)
	if sum := l.forget("a"); sum == nil || sum.Suppressed != 1 {
		t.Fatalf("forget = %+v, want the one suppressed event", sum)
	}
	// Forgotten: a new sandbox under the same id starts with a full burst.
	if ok, _ := l.allow(ev); !ok {
		t.Fatal("a forgotten sandbox's rate was kept")
	}
	unlimited := newAuditLimiter(-1, 0)
	for range 10000 {
		if ok, _ := unlimited.allow(ev); !ok {
			t.Fatal("a negative rate limited")
		}
	}
}
