//go:build pythonsdk

package python

import (
	"testing"

	"github.com/sandlot/sandlot/network/nettest"
)

func TestMain(m *testing.M) { nettest.Main(m) }
