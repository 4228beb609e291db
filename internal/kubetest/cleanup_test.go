package kubetest

import (
	"strings"
	"testing"
)

// TestReferencesChain: the sweep removes rules in the host's chains that
// jump to a cluster chain, and no other rule.
func TestReferencesChain(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want bool
	}{
		{`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`, true},
		{`-A POSTROUTING -s 10.245.0.2/32 -g CNI-abc`, true},
		{`-A INPUT -i lo -j ACCEPT`, false},
		{`-A FORWARD -m comment --comment "-j KUBE-X in a comment" -j ACCEPT`, false},
		{`-A OUTPUT -j SANDLOT-EGRESS`, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := referencesChain(strings.Fields(tc.rule)); got != tc.want {
				t.Errorf("referencesChain = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/var/lib/x`:          "/var/lib/x",
		`/var/lib/a\040b`:     "/var/lib/a b",
		`/var/lib/tab\011end`: "/var/lib/tab\tend",
		`/trailing\04`:        `/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
