package bench

import (
	"testing"

	"github.com/sandlot/sandlot/internal/kubetest"
)

// TestMain stops the test cluster, when a test started one
// (TestKubernetesGroup), and fails the binary if it left anything.
func TestMain(m *testing.M) { kubetest.Main(m) }
