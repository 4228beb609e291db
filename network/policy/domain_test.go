package policy

import "testing"

func TestOneLabelUnder(t *testing.T) {
	for _, tc := range []struct {
		host, name, label string
		ok                bool
	}{
		{"8000-sb1.sandlot.localhost", "8000-sb1.sandlot.localhost", "8000-sb1", true},
		{"8000-SB1.Sandlot.Localhost.:80", "8000-sb1.sandlot.localhost", "8000-sb1", true},
		{"a.b.sandlot.localhost", "a.b.sandlot.localhost", "", false},
		{"sandlot.localhost", "sandlot.localhost", "", false},
		{".sandlot.localhost", ".sandlot.localhost", "", false},
		{"x.evilsandlot.localhost", "x.evilsandlot.localhost", "", false},
	} {
		name, label, ok := OneLabelUnder(tc.host, "sandlot.localhost")
		if name != tc.name || ok != tc.ok || ok && label != tc.label {
			t.Errorf("OneLabelUnder(%q) = %q %q %v", tc.host, name, label, ok)
		}
	}
}
