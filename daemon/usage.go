package daemon

import (
	"context"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/templates"
)

// maxUsageContexts bounds the active contexts GET /v1/usage reads to find
// the busiest conversation; a tenant's limit is far below it by default.
const maxUsageContexts = 1000

// usage answers GET /v1/usage: each quota of the tenant the daemon
// enforces, with its use now, read where the limit is checked (the
// store's active contexts, the volume service, the snapshot catalog, the
// admission of requests).
func (d *Daemon) usage(st store.Backend, catalog *templates.Catalog, adm *admission) func(ctx context.Context, tenantID string) ([]api.Quota, error) {
	limit := func(n int64) int64 { return max(n, 0) }
	return func(ctx context.Context, tenantID string) ([]api.Quota, error) {
		perTenant, perConv := d.manager.Limits()
		recs, err := d.manager.List(ctx, contexts.Filter{TenantID: tenantID,
			States: []contexts.State{contexts.StateCreating, contexts.StateReady}, Limit: maxUsageContexts})
		if err != nil {
			return nil, err
		}
		type conv struct{ user, id string }
		byConv, busiest := map[conv]int64{}, int64(0)
		for _, r := range recs {
			k := conv{r.UserID, r.ConversationID}
			byConv[k]++
			busiest = max(busiest, byConv[k])
		}
		out := []api.Quota{
			{Name: "contexts", Used: int64(len(recs)), Limit: limit(int64(perTenant)),
				Description: "Active contexts (creating or ready) of the tenant."},
			{Name: "contextsPerConversation", Used: busiest, Limit: limit(int64(perConv)),
				Description: "Active contexts of the tenant's busiest conversation (one user's)."},
		}
		if d.vols != nil {
			vs, err := d.vols.List(ctx, tenantID)
			if err != nil {
				return nil, err
			}
			var bytes int64
			for _, v := range vs {
				bytes += v.SizeBytes
			}
			lim := d.vols.Limits()
			out = append(out,
				api.Quota{Name: "volumes", Used: int64(len(vs)), Limit: int64(lim.MaxPerTenant), Description: "Volumes of the tenant."},
				api.Quota{Name: "volumeBytes", Used: bytes, Limit: lim.MaxBytesPerTenant, Description: "The sum of the tenant's volumes' sizes, in bytes."})
		}
		if catalog != nil && catalog.MaxSnapshots() > 0 {
			sn, err := st.ListSnapshots(ctx, tenantID, "")
			if err != nil {
				return nil, err
			}
			out = append(out, api.Quota{Name: "snapshots", Used: int64(len(sn)), Limit: int64(catalog.MaxSnapshots()),
				Description: "Snapshots the tenant keeps."})
		}
		n, lim := adm.inFlight(tenantID)
		out = append(out, api.Quota{Name: "requestsInFlight", Used: int64(n), Limit: limit(int64(lim)),
			Description: "Requests of the tenant in flight on this daemon (open streams and shells included, this one too)."})
		return out, nil
	}
}
