package chain

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/telemetry"
)

// Plan is a provider's plan limit per tenant. Zero fields are unlimited.
type Plan struct {
	Creations      int64
	ComputeMinutes float64
}

// Account is the tenant name under which a quota keeps a provider's
// totals over all tenants: the usage an AccountPlans limit is checked
// against (E2B's plans limit an account, that is an API key, not one of
// sandlot's tenants).
const Account = "*"

// QuotaConfig configures quota tracking.
type QuotaConfig struct {
	// Plans by provider name, per tenant.
	Plans map[string]Plan
	// AccountPlans by provider name, for all tenants together (Account).
	AccountPlans map[string]Plan
	// File, when set, keeps the counts across restarts: read by NewQuota,
	// rewritten (atomically, 0600) after every creation and stop. Empty:
	// in memory only.
	File string
	// Thresholds are fractions of a limit that trigger a warning once
	// each. Nil: 0.8 and 1.0.
	Thresholds []float64
	// OnThreshold, when set, is called when usage crosses a threshold.
	// The quota records the used share itself (the sandlot.quota.usage
	// gauge, by tenant, provider and kind); this is for callers that
	// watch the crossings (tests).
	OnThreshold func(QuotaEvent)
	// Logger; nil discards.
	Logger *slog.Logger
	// Meter makes the usage gauge. Nil: telemetry.Meter(), the global
	// provider's.
	Meter metric.Meter
}

// QuotaEvent reports a crossed threshold.
type QuotaEvent struct {
	Tenant, Provider string
	Resource         string  // "creations" or "compute_minutes"
	Threshold        float64 // the fraction crossed
	Used, Limit      float64
}

// Usage of one tenant on one provider.
type Usage struct {
	Creations      int64
	ComputeMinutes float64
}

// Quota counts sandbox creations and compute minutes (sandbox wall time
// from create to destroy) per tenant and provider, and per provider for all
// tenants (Account), and warns at thresholds of the providers' plans. With
// QuotaConfig.File the counts, the running sandboxes and the warnings
// already given survive a restart. Safe for concurrent use.
type Quota struct {
	cfg   QuotaConfig
	log   *slog.Logger
	share metric.Float64Gauge // sandlot.quota.usage

	mu      sync.Mutex
	usage   map[key]*Usage
	running map[string]run // provider/sandbox id -> start
	warned  map[warnKey]bool
	savedAt time.Time // when File was last written (read from it at start)
}

type key struct{ tenant, provider string }

type run struct {
	key
	start time.Time
}

type warnKey struct {
	key
	resource  string
	threshold float64
}

// NewQuota returns a tracker. With cfg.File it starts from the counts kept
// there; a file that cannot be read or parsed is an error (counting from
// zero would hide a plan already used up).
func NewQuota(cfg QuotaConfig) (*Quota, error) {
	if cfg.Thresholds == nil {
		cfg.Thresholds = []float64{0.8, 1.0}
	}
	sort.Float64s(cfg.Thresholds)
	if cfg.Meter == nil {
		cfg.Meter = telemetry.Meter()
	}
	q := &Quota{cfg: cfg, log: cfg.Logger, usage: map[key]*Usage{}, running: map[string]run{}, warned: map[warnKey]bool{},
		share: telemetry.Gauge(cfg.Meter, "sandlot.quota.usage", "Share of a plan limit used, by tenant, provider and kind.")}
	if q.log == nil {
		q.log = slog.New(slog.DiscardHandler)
	}
	if err := q.load(); err != nil {
		return nil, err
	}
	return q, nil
}

// Started records a creation.
func (q *Quota) Started(tenant, provider, sandboxID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := key{tenant, provider}
	q.usageLocked(k).Creations++
	q.usageLocked(key{Account, provider}).Creations++
	q.running[provider+"/"+sandboxID] = run{k, now()}
	q.checkLocked(k)
	q.saveLocked()
}

// Stopped adds the sandbox's lifetime to its tenant's compute minutes.
func (q *Quota) Stopped(provider, sandboxID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.running[provider+"/"+sandboxID]
	if !ok {
		return
	}
	q.stopLocked(provider+"/"+sandboxID, r, now())
	q.saveLocked()
}

// stopLocked ends a running sandbox's count at t.
func (q *Quota) stopLocked(id string, r run, t time.Time) {
	delete(q.running, id)
	m := t.Sub(r.start).Minutes()
	q.usageLocked(r.key).ComputeMinutes += m
	q.usageLocked(key{Account, r.provider}).ComputeMinutes += m
	q.checkLocked(r.key)
}

// Live tells the quota which of a provider's sandboxes still run (a
// provider's List, after a restart): one it counts as running that is not
// listed ended while nobody watched, and is counted until the last time
// the quota file was written.
func (q *Quota) Live(provider string, ids []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	live := make(map[string]bool, len(ids))
	for _, id := range ids {
		live[provider+"/"+id] = true
	}
	changed := false
	for id, r := range q.running {
		if r.provider == provider && !live[id] {
			end := q.savedAt
			if end.Before(r.start) {
				end = r.start
			}
			q.stopLocked(id, r, end)
			changed = true
		}
	}
	if changed {
		q.saveLocked()
	}
}

// Usage returns a tenant's usage on a provider, running sandboxes included.
func (q *Quota) Usage(tenant, provider string) Usage {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.currentLocked(key{tenant, provider})
}

// Check re-evaluates thresholds with running sandboxes' time (call it
// periodically so a long-lived sandbox warns before it stops).
func (q *Quota) Check() {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.saveLocked() // the warnings given
	seen := map[key]bool{}
	for _, r := range q.running {
		if !seen[r.key] {
			seen[r.key] = true
			q.checkLocked(r.key)
		}
	}
}

func (q *Quota) usageLocked(k key) *Usage {
	u, ok := q.usage[k]
	if !ok {
		u = &Usage{}
		q.usage[k] = u
	}
	return u
}

func (q *Quota) currentLocked(k key) Usage {
	u := *q.usageLocked(k)
	t := now()
	for _, r := range q.running {
		if r.key == k || k.tenant == Account && r.provider == k.provider {
			u.ComputeMinutes += t.Sub(r.start).Minutes()
		}
	}
	return u
}

// checkLocked checks a tenant's usage against its plan and the provider's
// totals against the account's.
func (q *Quota) checkLocked(k key) {
	check := func(k key, plan Plan) {
		u := q.currentLocked(k)
		q.crossLocked(k, "creations", float64(u.Creations), float64(plan.Creations))
		q.crossLocked(k, "compute_minutes", u.ComputeMinutes, plan.ComputeMinutes)
	}
	if plan, ok := q.cfg.Plans[k.provider]; ok && k.tenant != Account {
		check(k, plan)
	}
	if plan, ok := q.cfg.AccountPlans[k.provider]; ok {
		check(key{Account, k.provider}, plan)
	}
}

func (q *Quota) crossLocked(k key, resource string, used, limit float64) {
	if limit <= 0 {
		return
	}
	for _, th := range q.cfg.Thresholds {
		wk := warnKey{k, resource, th}
		if used < th*limit || q.warned[wk] {
			continue
		}
		q.warned[wk] = true
		q.log.Warn("provider quota threshold reached", logkey.Tenant, k.tenant, logkey.Provider, k.provider,
			"resource", resource, "threshold", th, "used", used, "limit", limit)
		if limit > 0 {
			q.share.Record(context.Background(), used/limit, metric.WithAttributes(attribute.String("tenant", k.tenant),
				attribute.String("provider", k.provider), attribute.String("kind", resource)))
		}
		if q.cfg.OnThreshold != nil {
			q.cfg.OnThreshold(QuotaEvent{Tenant: k.tenant, Provider: k.provider, Resource: resource, Threshold: th, Used: used, Limit: limit})
		}
	}
}
