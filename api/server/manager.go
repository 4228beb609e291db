package server

import (
	"context"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
)

// ManagerContexts adapts *contexts.Manager to Contexts; serve and the
// tests wire the same adapter.
type ManagerContexts struct{ M *contexts.Manager }

var _ Contexts = ManagerContexts{}

func (a ManagerContexts) Get(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	return a.M.Get(ctx, tenantID, id)
}
func (a ManagerContexts) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	return a.M.List(ctx, f)
}
func (a ManagerContexts) Terminate(ctx context.Context, tenantID, id string, r contexts.Reason) error {
	return a.M.Terminate(ctx, tenantID, id, r)
}
func (a ManagerContexts) PathEvent(ctx context.Context, id contexts.Identity, ev api.PathEvent) error {
	return a.M.PathEvent(ctx, id, contexts.PathEvent{Type: ev.Type, SourcePathID: ev.SourcePathID, TargetPathID: ev.TargetPathID})
}
func (a ManagerContexts) Use(ctx context.Context, id contexts.Identity, fn func(context.Context, *contexts.Record, contexts.Sandbox) error) error {
	return a.M.Use(ctx, id, contexts.CreateOptions{}, fn)
}
func (a ManagerContexts) Stats() api.SessionMetrics {
	s := a.M.Stats()
	out := api.SessionMetrics{
		SessionStats: api.SessionStats{ActiveSessions: s.Active, TotalCreated: s.TotalCreated, TotalReused: s.TotalReused,
			TotalCleaned: s.TotalCleaned, HealthCheckFailures: s.HealthCheckFailures},
		PoolSize: s.PoolSize, PoolHits: s.PoolHits, PoolMisses: s.PoolMisses,
		PerTemplate: map[string]api.SessionStats{},
	}
	for name, t := range s.PerTemplate {
		out.PerTemplate[name] = api.SessionStats{ActiveSessions: t.Active, TotalCreated: t.TotalCreated, TotalReused: t.TotalReused,
			TotalCleaned: t.TotalCleaned, HealthCheckFailures: t.HealthCheckFailures}
	}
	return out
}
