package ports

import (
	"fmt"
	"net/netip"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/runtime"
)

// ChromiumRulesPath is where a root with Debian's Chromium gets the ports
// route's host-resolver rule: Debian's /usr/bin/chromium sources every
// file of ChromiumDir before it reads its arguments.
const ChromiumRulesPath = ChromiumDir + "/sandlot-ports"

// ChromiumDir is the directory whose presence says a root has Debian's
// Chromium wrapper.
const ChromiumDir = "/etc/chromium.d"

// ChromiumRules is the network file (runtime.Network.Files) that tells a
// sandbox's Chromium to reach every name under domain at addr, the
// sandbox's gateway, where the egress proxy answers the ports route.
// Chromium resolves *.localhost to its own loopback before asking any
// resolver (so the default ports domain would never leave the sandbox); a
// host-resolver rule is applied before that. The file is sourced by
// Chromium's wrapper, so the rule goes first among the wrapper's arguments
// ("set --"), which it passes to Chromium quoted, unlike its
// CHROMIUM_FLAGS (split on spaces). A root without the wrapper's
// directory gets nothing.
func ChromiumRules(domain string, addr netip.Addr) (runtime.File, error) {
	// A host name (letters, digits, '-', '_', '.') is also inert in the
	// shell file below.
	name, ok := policy.CanonicalName(domain)
	if !ok || !addr.Is4() {
		return runtime.File{}, fmt.Errorf("ports domain %q or address %s: %w", domain, addr, errdefs.ErrInvalidArgument)
	}
	return runtime.File{Path: ChromiumRulesPath, When: ChromiumDir, Data: []byte(
		"# sandlot: the daemon's ports route (<port>-<id>." + name + ") is answered at the\n" +
			"# sandbox's gateway, not on Chromium's own loopback.\n" +
			"set -- \"--host-resolver-rules=MAP *." + name + " " + addr.String() + "\" \"$@\"\n")}, nil
}
