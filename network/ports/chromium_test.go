package ports

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// TestChromiumRules: the ports route's host-resolver rule is a file for
// roots with Debian's Chromium (/etc/chromium.d), which the wrapper sources
// and sh turns into one argument, first, before the caller's; a domain that
// is not a DNS name never reaches the shell file.
func TestChromiumRules(t *testing.T) {
	gw := netip.MustParseAddr("10.254.0.1")
	f, err := ChromiumRules("sandlot.localhost", gw)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != "/etc/chromium.d/sandlot-ports" || f.When != "/etc/chromium.d" {
		t.Errorf("path %q when %q", f.Path, f.When)
	}
	p := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(p, f.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", `. "$0"; printf '%s\n' "$@"`, p, "--", "http://8000-x.sandlot.localhost/").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "--host-resolver-rules=MAP *.sandlot.localhost 10.254.0.1\n--\nhttp://8000-x.sandlot.localhost/\n"
	if string(out) != want {
		t.Errorf("the wrapper's arguments:\n%s\nwant:\n%s", out, want)
	}
	for _, bad := range []string{`x" "--remote-debugging-port=1`, "a b", "$(reboot)", "a..b", ""} {
		if _, err := ChromiumRules(bad, gw); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("domain %q: %v", bad, err)
		}
	}
	if _, err := ChromiumRules("sandlot.localhost", netip.MustParseAddr("::1")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an IPv6 gateway: %v", err)
	}
}
