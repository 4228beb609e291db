package console_test

import (
	"testing"

	"github.com/sandlot/sandlot/network/nettest"
)

// TestMain runs the package in a network namespace of its own (as root):
// the desktop test serves sandbox networks and a TLS front on port 443.
func TestMain(m *testing.M) { nettest.Main(m) }
