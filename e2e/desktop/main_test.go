// Package desktop runs the E2B desktop SDK, unchanged, against `sandlot
// serve` with sandbox networks and ports, inside a network namespace of
// the test's own (nettest.Main), so serve's nftables and veths never touch
// the machine's network.
package desktop

import (
	"testing"

	"github.com/sandlot/sandlot/network/nettest"
)

func TestMain(m *testing.M) { nettest.Main(m) }
