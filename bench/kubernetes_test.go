package bench

import (
	"context"
	"strings"
	"testing"
)

// TestKubernetesGroupNotRun: without a cluster the group is one line that
// says why.
func TestKubernetesGroupNotRun(t *testing.T) {
	cs := KubeCases(KubeEnv{NotRun: "no --kube-config and no $KUBECONFIG"}, DefaultKubeSizes)
	if len(cs) != 1 {
		t.Fatalf("cases = %d, want 1", len(cs))
	}
	_, err := cs[0].Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not run: no --kube-config") {
		t.Fatalf("err = %v", err)
	}
}
