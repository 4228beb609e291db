package guard

import (
	"strings"
	"testing"

	"github.com/sandlot/sandlot/guard/guardtest"
)

// TestScanBinaryGlued: in the view of binary data, values glued to the
// printable bytes around them still match; text keeps the strict rules.
func TestScanBinaryGlued(t *testing.T) {
	g := newTestGuard(t, Config{})
	email, tok := guardtest.Email(), guardtest.GitHubToken()
	for _, tc := range []struct {
		name, in, value string
	}{
		{"email into a signature", "\n" + email + "PK\n", email},
		{"email into a file name suffix", "\nto " + email + ".txtcontact\n", email},
		{"email into digits", "\n" + email + "42\n", email},
		{"token between words", "\nDublin" + tok + "Xy7\n", tok},
		{"AWS key id after a word", "\nname" + "AKIA" + "QWERTYUIOPASDFGH" + "ZZ\n", "AKIA" + "QWERTYUIOPASDFGH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := g.scanBinary(tc.in)
			at := strings.Index(tc.in, tc.value)
			found := false
			for _, f := range fs {
				found = found || f.Start <= at && f.End >= at+len(tc.value)
			}
			if !found {
				t.Fatalf("scanBinary(%q) = %+v, want the value covered", tc.in, fs)
			}
			if fs := g.Scan(tc.in); len(fs) != 0 {
				t.Errorf("text scan matched a glued value: %+v", fs)
			}
		})
	}
}
