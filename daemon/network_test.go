package daemon

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/policy"
	storeaudit "github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
)

// A proxy event lands in the store's audit trail with its tenant, context,
// destination, bytes and verdict, and no payload.
func TestNetworkAuditEvent(t *testing.T) {
	st := memory.New()
	ctx := context.Background()
	ev := audit.Event{SandboxID: "sb-1", Tenant: "t1", Proto: audit.ProtoHTTP, Host: "pypi.org",
		Addr: netip.MustParseAddr("203.0.113.5"), Port: 80, BytesUp: 120, BytesDown: 4096,
		Allowed: false, Reason: "not in the allowlist", Start: time.Now(), Duration: 3 * time.Millisecond}
	if err := st.AppendAudit(ctx, networkAuditEvent(ev, "ctx-1")); err != nil {
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
	dns := networkAuditEvent(audit.Event{Tenant: "t1", Proto: audit.ProtoDNS, Host: "x.test", Allowed: true}, "")
	if dns.Kind != storeaudit.KindNetDNS || dns.Detail["bytesUp"] != "" {
		t.Errorf("dns event %+v", dns)
	}
}

func TestNetworkOperator(t *testing.T) {
	op, err := Network{AllowOpen: true, Reachable: "10.1.0.0/16, 192.168.5.7/32"}.operator()
	if err != nil || !op.Default.AllowOpen || len(op.Default.Reachable) != 2 {
		t.Fatalf("%+v %v", op, err)
	}
	if _, err := (Network{Reachable: "10.1.0.0/99"}).operator(); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad range: %v", err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "op.json")
	os.WriteFile(good, []byte(`{"default": {"maxRules": 10}, "tenants": {"t9": {"allowOpen": true}}}`), 0o600)
	op, err = Network{PolicyFile: good}.operator()
	if err != nil || op.Default.MaxRules != 10 || !op.Cap("t9").AllowOpen || op.Cap("t1").AllowOpen {
		t.Fatalf("%+v %v", op, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"default": {"allowOpne": true}}`), 0o600)
	if _, err := (Network{PolicyFile: bad}).operator(); err == nil || !strings.Contains(err.Error(), "allowOpne") {
		t.Errorf("unknown field: %v", err)
	}
	// Without --network the caps still apply (the e2b provider).
	err = policyOnly{&policy.Operator{}}.Check("t1", policy.Policy{Mode: policy.Open})
	if !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("open without the cap: %v", err)
	}
}
