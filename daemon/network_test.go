package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

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
