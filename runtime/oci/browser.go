package oci

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// ChromiumRulesPath is where a root with Debian's Chromium gets the
// ports route's host-resolver rule: Debian's /usr/bin/chromium sources
// every file of /etc/chromium.d before it reads its arguments.
const ChromiumRulesPath = "/etc/chromium.d/sandlot-ports"

// chromiumDir is the directory whose presence says the root has Debian's
// Chromium wrapper.
const chromiumDir = "/etc/chromium.d"

// chromiumRules is the file sourced by Chromium's wrapper that maps every
// name under domain to addr. Chromium resolves *.localhost to its own
// loopback before asking any resolver (so the default ports domain would
// never leave the sandbox); a host-resolver rule is applied before that.
// The rule goes first among the wrapper's arguments ("set --"), which it
// passes to Chromium quoted, unlike its CHROMIUM_FLAGS (split on spaces).
func chromiumRules(domain string, addr netip.Addr) ([]byte, error) {
	// A host name (letters, digits, '-', '_', '.') is also inert in the
	// shell file below.
	name, ok := policy.CanonicalName(domain)
	if !ok || !addr.Is4() {
		return nil, fmt.Errorf("ports domain %q or address %s: %w", domain, addr, errdefs.ErrInvalidArgument)
	}
	domain = name
	return []byte("# sandlot: the daemon's ports route (<port>-<id>." + domain + ") is answered at the\n" +
		"# sandbox's gateway, not on Chromium's own loopback.\n" +
		"set -- \"--host-resolver-rules=MAP *." + domain + " " + addr.String() + "\" \"$@\"\n"), nil
}

// dirInRoot reports whether name is a directory inside root, resolved as
// the sandbox would (symlinks stay inside root).
func dirInRoot(root, name string) bool {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, strings.TrimPrefix(name, "/"), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
