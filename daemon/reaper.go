package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/store"
)

// Deleting a tenant (`sandlot tenant delete`, on the store) revokes its key
// and tokens at once; the daemon that serves its contexts ends them here,
// with reason deleted, and destroys their sandboxes.
const (
	tenantPollEvery = 2 * time.Second // tenants that disappeared since the last poll
	tenantSweepRuns = 30              // every this many polls, every active record is checked
)

// tenantReaper ends the contexts of deleted tenants.
type tenantReaper struct {
	st  store.Backend
	m   *contexts.Manager
	log *slog.Logger

	known map[string]bool // tenants seen at the last poll
}

// run polls until ctx ends. The first pass checks every active record, so
// a tenant deleted while no daemon ran loses its contexts at the next
// start.
func (r *tenantReaper) run(ctx context.Context) {
	t := time.NewTicker(tenantPollEvery)
	defer t.Stop()
	for n := 0; ; n++ {
		r.pass(ctx, n%tenantSweepRuns == 0)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass ends the active contexts of tenants that no longer exist: those of
// tenants gone since the last pass, or with full, of every tenant. It
// returns how many it ended.
func (r *tenantReaper) pass(ctx context.Context, full bool) int {
	full = full || r.known == nil
	// Records before tenants: a record listed was created by a tenant that
	// existed then, so a tenant missing from the later list was deleted
	// (listing tenants first would take one created in between for gone).
	var recs []*contexts.Record
	if full {
		var err error
		if recs, err = r.st.ListActive(ctx); err != nil {
			r.log.Warn("tenant reaper: list active contexts", slog.String(logkey.Err, err.Error()))
			return 0
		}
	}
	ts, err := r.st.ListTenants(ctx)
	if err != nil {
		r.log.Warn("tenant reaper: list tenants", slog.String(logkey.Err, err.Error()))
		return 0
	}
	now := make(map[string]bool, len(ts))
	for _, t := range ts {
		now[t.ID] = true
	}
	if !full {
		for id := range r.known {
			if now[id] {
				continue
			}
			more, err := r.m.List(ctx, contexts.Filter{TenantID: id, States: []contexts.State{contexts.StateCreating, contexts.StateReady}, Limit: 10000})
			if err != nil {
				r.log.Warn("tenant reaper: list contexts", slog.String(logkey.Tenant, id), slog.String(logkey.Err, err.Error()))
				continue
			}
			recs = append(recs, more...)
		}
	}
	r.known = now
	ended := 0
	for _, rec := range recs {
		if now[rec.TenantID] {
			continue
		}
		if err := r.m.Terminate(ctx, rec.TenantID, rec.ID, contexts.ReasonDeleted); err != nil {
			r.log.Warn("tenant reaper: terminate", slog.String(logkey.Context, rec.ID), slog.String(logkey.Err, err.Error()))
			continue
		}
		ended++
	}
	if ended > 0 {
		r.log.Info("ended the contexts of deleted tenants", slog.Int("contexts", ended))
	}
	return ended
}
