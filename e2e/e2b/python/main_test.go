// Package python runs the official E2B Python SDKs (e2b and
// e2b_code_interpreter, installed by scripts/e2b-python.sh) unchanged
// against `sandlot serve`: sdk_suite.py, under Debian's python3.
//
// The daemon runs with sandbox networks, in a network namespace of the
// test's own (nettest.Main) and a mount namespace whose /run/sandlot is
// its own, so it neither touches the machine's network nor meets another
// daemon's networks on the host.
package python

import (
	"testing"

	"github.com/sandlot/sandlot/network/nettest"
)

func TestMain(m *testing.M) { nettest.Main(m) }
