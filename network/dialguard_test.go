package network

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// TestDialGuard: what a tenant's pull may connect to. The public internet
// (here the documentation ranges, which stand for it in the tests) yes;
// loopback, private, CGNAT, link-local, metadata, unspecified, the host's
// own addresses no, unless the operator opened them: a range opens
// private space, while metadata and the host's own addresses open only
// when listed as themselves.
func TestDialGuard(t *testing.T) {
	open := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	for _, tc := range []struct {
		addr  string
		allow []netip.Prefix
		ok    bool
	}{
		{"203.0.113.7", nil, true},
		{"2001:db8::1", nil, true},
		{"127.0.0.1", nil, false},
		{"::1", nil, false},
		{"::ffff:127.0.0.1", nil, false},
		{"10.1.2.3", nil, false},
		{"172.16.0.1", nil, false},
		{"192.168.1.1", nil, false},
		{"100.64.0.1", nil, false},
		{"169.254.169.254", nil, false},
		{"fd00:ec2::254", nil, false},
		{"fe80::1", nil, false},
		{"0.0.0.0", nil, false},
		{"::", nil, false},
		{"10.1.2.3", open, true},
		{"10.2.0.1", open, false},
		{"169.254.1.1", open, true},
		{"169.254.169.254", open, false}, // metadata: only listed exactly
		{"127.0.0.2", open, false},       // a host address: only listed exactly
		{"127.0.0.1", open, true},
	} {
		err := DialGuard{Allow: tc.allow}.Check(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("%s (allow %v): %v, want allowed %v", tc.addr, tc.allow, err, tc.ok)
		}
	}
}
