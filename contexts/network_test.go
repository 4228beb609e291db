package contexts_test

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/policy"
)

// gatedNets holds every network update until its gate opens.
type gatedNets struct {
	claimNets
	entered chan struct{}
	gate    chan struct{}
}

func (n *gatedNets) Update(context.Context, string, string, policy.Policy) (*policy.Effective, error) {
	n.entered <- struct{}{}
	<-n.gate
	return &policy.Effective{}, nil
}

// TestUpdateNetworkKeepsCallsAnsweredMeanwhile: calls answered while a
// network update is under way stay counted in the store after it (the
// update writes the network on the stored record, not on the one it read
// before).
func TestUpdateNetworkKeepsCallsAnsweredMeanwhile(t *testing.T) {
	nets := &gatedNets{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	e := newEnv(t, contexts.Config{Networks: nets})
	id := ident("t1", "c1", "main")
	rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{Network: &policy.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.m.UpdateNetwork(e.ctx, "t1", rec.ID, policy.Policy{Ingress: policy.Ingress{Public: true}})
		done <- err
	}()
	within(t, "the network update", func() { <-nets.entered })
	e.exec(id, "x = 1")
	e.exec(id, "x = 2")
	close(nets.gate)
	within(t, "UpdateNetwork", func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	stored := e.record(rec.ID)
	if stored.ExecutionCount != 2 || stored.Network == nil || !stored.Network.Ingress.Public {
		t.Fatalf("stored after the update: count %d, network %+v; want 2 and the new network", stored.ExecutionCount, stored.Network)
	}
}
