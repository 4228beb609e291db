// Package k8s tests the single-node test cluster itself (internal/kubetest):
// images from the harness's registry run under runc and gVisor, agent-sandbox
// warm pools and claims work, and NetworkPolicy is enforced. Everything that
// runs sandlot on Kubernetes stands on these.
package k8s

import (
	"testing"

	"github.com/sandlot/sandlot/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }
