package contexts

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
)

// PoolSpec is how a template's warm sandboxes are made where they differ
// from a plain create (Config.PoolSpecs). A create takes a warm sandbox
// only when it asks for the same network and environment, so a warm
// sandbox is exactly what the create would have made, plus Warm's work.
type PoolSpec struct {
	// Size is the template's default pool size (Config.PoolSizes
	// overrides it); 0: no pool.
	Size int
	// Network and Env are given to every warm sandbox. A warm sandbox's
	// network is set up before it has a tenant: the operator's caps
	// apply to it as to a tenant without caps of its own (the create's
	// tenant's caps are checked when it takes one), and its audit events
	// name no context.
	Network *policy.Policy
	Env     map[string]string
	// Warm runs once on each new warm sandbox before it is offered (for
	// a desktop: its X server and session started); an error discards
	// the sandbox. It also runs on the sandbox a create makes anew when
	// the pool could have served it (same network and environment) but
	// had none ready, before the create returns; its error fails that
	// create. PoolFill(ctx) tells the two apart: a create waits for its
	// own warm-up, and for a pool's fill only when it arrives while the
	// fill is under way and none is ready (bounded by the pool's wait).
	// nil: nothing.
	Warm func(ctx context.Context, sb Sandbox) error
	// Bytes is what one of the template's warm sandboxes holds, counted
	// against Config.PoolMemoryBudget when the pool grows with demand;
	// 0: Config.PoolSandboxBytes.
	Bytes int64
	// Prestart names the kernels the template's warm sandboxes start at
	// boot (Spec.Prestart); nil: Config.PoolPrestart, []string{}: none.
	// A create naming other kernels (CreateOptions.WarmKernels) takes
	// from a pool of its own.
	Prestart []string
}

// poolFillKey marks the context of a pool's fill (PoolFill).
type poolFillKey struct{}

// PoolFill reports whether ctx is that of PoolSpec.Warm on a warm pool's
// new sandbox (which a create waits for only when it arrives during the
// fill with none ready), rather than on a create's own.
func PoolFill(ctx context.Context) bool { return ctx.Value(poolFillKey{}) != nil }

// poolKey names a warm pool: a template and the kernels its sandboxes
// start at boot. One template may have several pools (a create chooses
// with CreateOptions.WarmKernels): E2B's base sandbox runs commands and
// never needs the python kernel that /v1's first call finds started.
type poolKey struct {
	template string
	kernels  string // the kernels' names, joined by commas
}

// prestart is the kernels k's sandboxes start at boot.
func (k poolKey) prestart() []string {
	if k.kernels == "" {
		return []string{}
	}
	return strings.Split(k.kernels, ",")
}

// templateKernels is what template's own pool starts at boot
// (PoolSpec.Prestart, else Config.PoolPrestart).
func (m *Manager) templateKernels(template string) []string {
	if k := m.cfg.PoolSpecs[template].Prestart; k != nil {
		return k
	}
	return m.cfg.PoolPrestart
}

// poolKeyOf is the pool a create of template takes from: the one of
// warm's kernels (CreateOptions.WarmKernels) when Config.PoolWarmKernels
// names that set, else the template's own. Only the operator's sets get
// a pool: a create cannot make the manager keep pools of its choosing.
func (m *Manager) poolKeyOf(template string, warm []string) poolKey {
	kernels := m.templateKernels(template)
	if warm != nil && slices.ContainsFunc(m.cfg.PoolWarmKernels, func(ks []string) bool { return slices.Equal(ks, warm) }) {
		kernels = warm
	}
	return poolKey{template: template, kernels: strings.Join(kernels, ",")}
}

// poolChoose is the pool a create of template asking for warm's kernels
// takes from: poolKeyOf's, or, when that pool holds no sandbox ready or
// being made (one no create asked for yet, such as the kernel-less pool
// of a --pool-sizes template), the template's own pool when it holds one
// ready and its sandboxes start every kernel asked for. A warm sandbox
// with a kernel more serves the create, as one did before pools had
// kernel sets, where a cold create would not: an E2B desktop create
// takes the started desktop of the template's own pool.
func (m *Manager) poolChoose(template string, warm []string) poolKey {
	k := m.poolKeyOf(template, warm)
	own := m.poolKeyOf(template, nil)
	if warm == nil || k == own {
		return k
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pools[k]; p != nil && (len(p.ready) > 0 || p.filling > 0) {
		return k
	}
	if p := m.pools[own]; p != nil && len(p.ready) > 0 && containsAll(own.prestart(), warm) {
		return own
	}
	return k
}

// containsAll reports whether have holds every name of want.
func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// poolServes reports whether a create with opts may take a warm sandbox
// of template.
func (m *Manager) poolServes(template string, opts CreateOptions) bool {
	spec := m.cfg.PoolSpecs[template]
	if len(opts.Volumes) > 0 || opts.MemoryCheckpoint != "" { // a warm sandbox started without them, or fresh
		return false
	}
	if len(opts.Env) != len(spec.Env) || (len(opts.Env) > 0 && !maps.Equal(opts.Env, spec.Env)) {
		return false
	}
	if (opts.Network == nil) != (spec.Network == nil) {
		return false
	}
	return opts.Network == nil || reflect.DeepEqual(*opts.Network, *spec.Network)
}

// pool keeps warm sandboxes of one template. A pooled sandbox has never
// run user code and has no record: the manager knows it only in memory,
// so Close destroys the pool.
type pool struct {
	key     poolKey
	size    int
	kick    chan struct{} // wakes the worker to refill
	wake    chan struct{} // ends the worker's backoff (RefreshPool)
	filled  chan error    // each creation's outcome, to the worker
	ready   []Sandbox     // guarded by Manager.mu; oldest first
	filling int           // sandboxes being created; guarded by Manager.mu
	gen     int           // RefreshPool's count; guarded by Manager.mu
	demand  demand        // recent acquisitions; guarded by Manager.mu
	// waiting is how many creates wait for a sandbox being made (poolWait);
	// made is closed, and replaced, each time a creation ends; fillTime is
	// how long creations took lately (a moving average; 0: none yet). All
	// guarded by Manager.mu.
	waiting  int
	made     chan struct{}
	fillTime time.Duration
	// gaveUp counts creates that stopped waiting with nothing and made
	// their own sandbox: the one made for each (poolLaunch) is surplus
	// when it lands on a pool at its target (at most filling; guarded by
	// Manager.mu).
	gaveUp int
}

// RefreshPool replaces template's warm sandboxes: the ready ones are
// destroyed, one being created now is destroyed when it is done, and the
// pool refills at once. The daemon calls it when a built-in template's
// image changes (the default's full image replacing its core), so a
// create from then on never gets a sandbox of the image before.
func (m *Manager) RefreshPool(template string) {
	m.mu.Lock()
	var stale []Sandbox
	for k, p := range m.pools {
		if k.template != template {
			continue
		}
		stale = append(stale, p.ready...)
		p.ready = nil
		p.gen++
		for _, c := range []chan struct{}{p.kick, p.wake} {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
	m.mu.Unlock()
	for _, sb := range stale {
		m.destroyLater(sb)
	}
}

// poolEnsure makes sure pool k exists (when its template's size is
// positive and the manager runs) and asks it to refill.
func (m *Manager) poolEnsure(k poolKey) {
	size := m.poolSize(k.template)
	if size <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started || m.closed {
		return
	}
	p := m.pools[k]
	if p == nil {
		p = &pool{key: k, size: size, kick: make(chan struct{}, 1), wake: make(chan struct{}, 1),
			filled: make(chan error, poolFillers), made: make(chan struct{})}
		m.pools[k] = p
		m.wg.Add(1)
		go m.poolWorker(p)
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// poolsWarm starts the pools warmed at Start (and when this node takes
// the cluster lease): the default template's own and those of
// Config.PoolWarmKernels, and the own pools of the templates in
// PoolSizes (their other pools are made when a create asks).
func (m *Manager) poolsWarm(ctx context.Context) {
	def := m.defaultTemplateID(ctx)
	m.poolEnsure(m.poolKeyOf(def, nil))
	for _, ks := range m.cfg.PoolWarmKernels {
		m.poolEnsure(m.poolKeyOf(def, append([]string{}, ks...)))
	}
	for t := range *m.poolSizes.Load() {
		m.poolEnsure(m.poolKeyOf(t, nil))
	}
}

// poolKick asks pool k, if it exists, to refill.
func (m *Manager) poolKick(k poolKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pools[k]; p != nil {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// poolKickAfter asks pool k to refill after a take: at once after
// a miss or when the pool holds no warm sandbox now, else poolRefillDelay
// later. A creation costs tens of milliseconds of CPU, which on a small
// machine the caller's first call would share: its create returned a
// moment ago, so that call is on its way (an E2B create's first command
// follows within a few milliseconds). A pool that keeps being taken from
// refills anyway, as each creation ends (poolWorker).
func (m *Manager) poolKickAfter(k poolKey, hit bool) {
	m.mu.Lock()
	p := m.pools[k]
	later := hit && p != nil && len(p.ready) > 0
	m.mu.Unlock()
	if !later {
		m.poolKick(k)
		return
	}
	time.AfterFunc(poolRefillDelay, func() { m.poolKick(k) })
}

// poolTake returns a warm, healthy sandbox of pool k for a create of
// id's, told its identity (poolTell), or nil (a miss, counted when the
// template is pooled and the manager runs). With none ready but one being made that no other create
// waits for, it waits for that one (poolWait): it is ready sooner than a
// new sandbox would be, and a cold create beside the pool's own would slow
// both on a small machine. A hit that leaves a warm sandbox ready asks
// for the refill poolRefillDelay later (poolKickAfter).
func (m *Manager) poolTake(ctx context.Context, id Identity, k poolKey) (taken Sandbox) {
	tenantID, template := id.TenantID, k.template
	if m.poolSize(template) <= 0 {
		return nil
	}
	defer func() { m.poolKickAfter(k, taken != nil) }()
	counted := false
	var waitUntil time.Time // set at the first wait (real time, as fillTime)
	for {
		m.mu.Lock()
		if !m.started || m.closed { // Close destroys what the pool holds
			m.mu.Unlock()
			return nil
		}
		p := m.pools[k]
		if p != nil && !counted {
			p.demand.add(m.now()) // a take or a miss: the demand the pool grows by
			counted = true
		}
		if p != nil && len(p.ready) == 0 && p.filling > p.waiting {
			if waitUntil.IsZero() {
				bound := poolWaitBound(p.fillTime)
				if m.poolWaitMax > 0 {
					bound = m.poolWaitMax
				}
				waitUntil = time.Now().Add(bound)
			}
			if m.poolWait(ctx, p, waitUntil) {
				continue
			}
			if ctx.Err() != nil {
				return nil
			}
			m.mu.Lock()
		}
		if p == nil || len(p.ready) == 0 {
			m.ts(tenantID, template).PoolMisses++
			m.mu.Unlock()
			return nil
		}
		sb := p.ready[0]
		p.ready = p.ready[1:]
		m.mu.Unlock()

		healthy, err := m.poolTell(ctx, sb, id)
		if err != nil {
			m.log.Warn("warm sandbox unhealthy or not told its identity; discarding it", logkey.Sandbox, sb.ID(), logkey.Err, err)
			m.destroyLater(sb)
			if ctx.Err() != nil {
				return nil
			}
			if !healthy { // the next one may be alive
				continue
			}
			m.mu.Lock()
			m.ts(tenantID, template).PoolMisses++
			m.mu.Unlock()
			return nil
		}
		m.count(tenantID, template, func(s *TemplateStats) { s.PoolHits++ })
		return sb
	}
}

// poolTell tells a warm sandbox the identity of the context taking it,
// which is also its health check: the call's round trip proves the agent
// answers, as the ping before it did (one round trip per warm create
// less). A sandbox that cannot be told is pinged. When the call fails, a
// ping says whether the sandbox is dead (healthy false: the next warm one
// may serve) or refused the call (healthy true: the next would too).
func (m *Manager) poolTell(ctx context.Context, sb Sandbox, id Identity) (healthy bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, m.cfg.HealthCheckTimeout)
	defer cancel()
	es, ok := sandboxAs[envSetter](sb)
	if !ok {
		return false, sb.Ping(pctx)
	}
	if err = es.SetEnv(pctx, IdentityEnv(id)); err == nil {
		return true, nil
	}
	return sb.Ping(pctx) == nil, err
}

// poolWait waits, until the deadline or ctx ends, for one of p's creations
// under way to end, and reports whether one did (the caller looks at the
// pool again). Precondition: m.mu is held; it is released.
func (m *Manager) poolWait(ctx context.Context, p *pool, deadline time.Time) bool {
	p.waiting++
	made := p.made
	select { // the worker makes one more for the waiter (poolLaunch)
	case p.kick <- struct{}{}:
	default:
	}
	m.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	ended := false
	select {
	case <-made:
		ended = true
	case <-t.C:
	case <-ctx.Done():
	}
	m.mu.Lock()
	p.waiting--
	if !ended {
		p.gaveUp = min(p.gaveUp+1, p.filling)
	}
	m.mu.Unlock()
	return ended
}

// poolWorker keeps p at its target (poolTarget: its size, grown by the
// recent acquisition rate within the memory budget), one creation at a
// time at its size and poolFillers at once while grown, backing off while
// the provider fails; it trims a grown pool back to its size once
// acquisitions stop for poolIdle. With a shared provider only the holder
// of the cluster lease fills its pools (the refill runs once across the
// nodes); taking the lease kicks them (tookLease).
func (m *Manager) poolWorker(p *pool) {
	defer m.wg.Done()
	ctx, cancel := m.loopCtx()
	defer cancel()
	backoff := time.Duration(0)
	var retry <-chan time.Time // set while backing off
	for {
		if retry == nil {
			m.poolLaunch(ctx, p)
		}
		var recheck <-chan time.Time
		if d, ok := m.poolTrimDue(p); ok {
			recheck = time.After(d)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-recheck:
		case <-retry:
			retry = nil
		case <-p.wake:
			retry = nil
		case err := <-p.filled:
			if err == nil {
				backoff = 0
				continue
			}
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
			if after, ok := errdefs.RetryAfter(err); ok {
				// A state that passes (the template being built): said,
				// not warned about, and looked at again when it says.
				backoff = after
				m.log.Info("warm pool: waiting for the template", logkey.Template, p.key.template, logkey.Kernels, p.key.kernels, logkey.Err, err, "retry_in", backoff)
			} else {
				m.log.Warn("warm pool: create sandbox", logkey.Template, p.key.template, logkey.Kernels, p.key.kernels, logkey.Err, err, "retry_in", backoff)
			}
			retry = time.After(backoff)
		}
	}
}

// poolLaunch starts the creations p needs to reach its target, and trims
// a grown pool idle for poolIdle back to its size.
func (m *Manager) poolLaunch(ctx context.Context, p *pool) {
	now := m.now()
	m.mu.Lock()
	if m.closed || !m.HoldsLease() {
		m.mu.Unlock()
		return
	}
	var trim []Sandbox
	if n := len(p.ready) - p.size; n > 0 && now.Sub(p.demand.newest()) >= poolIdle {
		trim = slices.Clone(p.ready[:n]) // the oldest
		p.ready = slices.Delete(p.ready, 0, n)
	}
	target := m.poolTargetLocked(p, now)
	fillers := 1
	if target > p.size {
		fillers = poolFillers
	}
	// A create waiting for a sandbox being made (poolWait) takes one the
	// pool counted on: one more is made for each, as its own create would
	// have been, so a burst is served as fast as before it waited.
	launch := 0
	for len(p.ready)+p.filling < target+p.waiting && p.filling < fillers+p.waiting {
		p.filling++
		launch++
	}
	gen := p.gen
	m.mu.Unlock()
	for _, sb := range trim {
		m.destroy(context.Background(), sb, sb.ID())
	}
	for range launch {
		m.wg.Add(1) // the worker's own count is held: Close still waits
		go m.poolMake(ctx, p, gen)
	}
}

// poolTargetLocked is p's target now. Precondition: m.mu is held.
func (m *Manager) poolTargetLocked(p *pool, now time.Time) int {
	var held int64
	for _, q := range m.pools {
		if q != p {
			held += int64(len(q.ready)+q.filling) * m.poolBytes(q.key.template)
		}
	}
	return poolTarget(p.size, p.demand.rate(now), poolLimit(m.cfg.PoolMemoryBudget, held, m.poolBytes(p.key.template)))
}

// poolBytes is what one warm sandbox of template is taken to hold against
// the pools' memory budget (PoolSpec.Bytes, else Config.PoolSandboxBytes).
func (m *Manager) poolBytes(template string) int64 {
	if b := m.cfg.PoolSpecs[template].Bytes; b > 0 {
		return b
	}
	return m.cfg.PoolSandboxBytes
}

// poolTrimDue reports when p, grown past its size, is due for its trim.
func (m *Manager) poolTrimDue(p *pool) (time.Duration, bool) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(p.ready) <= p.size {
		return 0, false
	}
	return max(p.demand.newest().Add(poolIdle).Sub(now), 0) + time.Millisecond, true
}

// poolMake creates one warm sandbox for p and reports to its worker (ctx:
// the worker's). The creation runs in m.makes: Close waits for it.
func (m *Manager) poolMake(ctx context.Context, p *pool, gen int) {
	defer m.wg.Done()
	defer m.creates.begin(m.now())() // until the pool holds the sandbox (sweep.go)
	spec := m.cfg.PoolSpecs[p.key.template]
	start := time.Now() // real time: fillTime bounds real waits
	sb, err := m.provider.Create(m.makes, Spec{
		Template: p.key.template,
		Limits:   m.cfg.Limits,
		Labels:   map[string]string{"sandlot.pool": p.key.template},
		Prestart: p.key.prestart(),
		Env:      maps.Clone(spec.Env),
		Network:  spec.Network,
	})
	if err == nil && spec.Warm != nil {
		if err = spec.Warm(context.WithValue(m.makes, poolFillKey{}, true), sb); err != nil {
			m.destroy(context.Background(), sb, sb.ID())
		}
	}
	m.mu.Lock()
	p.filling--
	closed := m.closed
	stale := gen != p.gen // made before RefreshPool: maybe of the image before
	// One made for a create that gave up waiting, landing on a pool at
	// its target, would hold the pool over its size (and the memory
	// budget) until the idle trim: it is destroyed.
	surplus := p.gaveUp > 0 && len(p.ready) >= m.poolTargetLocked(p, m.now())+p.waiting
	if surplus {
		p.gaveUp--
	}
	p.gaveUp = min(p.gaveUp, p.filling)
	keep := err == nil && !closed && !stale && !surplus
	if keep {
		p.ready = append(p.ready, sb)
	}
	if err == nil {
		p.fillTime = movingAverage(p.fillTime, time.Since(start))
	}
	close(p.made) // creates waiting for it look again
	p.made = make(chan struct{})
	m.mu.Unlock()
	if err == nil && !keep {
		m.destroy(context.Background(), sb, sb.ID())
	}
	select {
	case p.filled <- err:
	case <-ctx.Done(): // the worker is gone
	}
}

// loopCtx returns a context that ends when the manager closes.
func (m *Manager) loopCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-m.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
