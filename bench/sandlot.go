package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/volumes"
)

// Env is what the sandlot cases run on. Provider is a real provider
// (provider/local); every case builds its own Manager over it and a store
// (Store's, or a memory store), and tears down what it created.
type Env struct {
	Provider contexts.Provider
	// Usage samples a sandbox's cgroup (provider/local implements it); nil
	// leaves the cgroup figure out of the density case.
	Usage contexts.UsageSampler
	// Guard is the egress guard the managers use (nil: none).
	Guard *guard.Guard
	// HTTPURL and APIKey reach an in-process `sandlot serve` (same wiring)
	// on loopback; "" skips the HTTP figure.
	HTTPURL, APIKey string
	// Limits apply to every sandbox (memory: modest, so 50 fit).
	Limits contexts.Limits
	// ImageProvider, when set, is a provider whose default template is an
	// image (the Debian base): the image cases run on it, beside the
	// Provider's host-root figures. ImageUsage samples its sandboxes.
	ImageProvider contexts.Provider
	ImageUsage    contexts.UsageSampler
	ImageStoreDir string // the image store, whose size is reported once
	// Volumes, when set, are the volumes ImageProvider's sandboxes mount:
	// the volume case runs (volume.go).
	Volumes *volumes.Service
	// ImageCatalog, when set, is ImageProvider's template catalog, with
	// snapshots: the state cases (state.go) run on it.
	ImageCatalog *templates.Catalog
	// DesktopProvider, when set, starts the desktop template (its image
	// and DesktopCatalog's settings): the desktop cases run on it.
	DesktopProvider contexts.Provider
	DesktopUsage    contexts.UsageSampler
	DesktopCatalog  contexts.Catalog
	// E2B, when set, starts daemons serving the E2B surface: the E2B SDK
	// figures (e2bsdk.go) run on them when node and the SDK (E2BSDKDir,
	// "" to look for e2e/e2b) are there.
	E2B       E2BServers
	E2BSDKDir string
	// Runtime names the providers' OCI runtime (crun, runc, runsc): the
	// cold rows take its goals, and runsc adds its own cases (runsc.go).
	Runtime string
	// E2BSamples, when set, is a file the E2B SDK figures write their
	// pooled run's samples to (JSON: each series' milliseconds, and
	// NAME:at, when each sample started, in Unix milliseconds), to match
	// slow samples with what else ran then.
	E2BSamples string
	// Store, when set, opens the store of each manager a case builds
	// (name tells them apart; close releases it); nil: a memory store.
	Store func(ctx context.Context, name string) (st contexts.Store, close func(), err error)
}

// Sizes are the sample counts. The defaults (DefaultSizes) keep a full
// run under three minutes on two cores.
type Sizes struct {
	Floor       int           // floor samples
	Warm        int           // warm round trips per language (Go API)
	HTTP        int           // warm round trips over HTTP
	Cold        int           // cold creates
	Pool        int           // pool acquisitions
	Throughput  time.Duration // per concurrency level
	Concurrency []int         // concurrent contexts
	GuardMB     int           // guard corpus size
	Peer        int           // Jupyter samples (bwrap: a tenth); 0 skips the peers
	Desktop     int           // desktop creates per case (actions: five times that); 0 skips them
	// The E2B SDK figures: creates in a row (with the pool and without;
	// 0 skips the figures), a burst of creates kept alive, and rounds of
	// creates at once.
	E2BSerial, E2BBurst, E2BConcurrent, E2BRounds int
}

// DefaultSizes is what `sandlot bench` runs without flags.
var DefaultSizes = Sizes{Floor: 3000, Warm: 3000, HTTP: 3000, Cold: 30, Pool: 30,
	Throughput: 5 * time.Second, Concurrency: []int{10, 50}, GuardMB: 16, Peer: 200, Desktop: 3,
	E2BSerial: 30, E2BBurst: 100, E2BConcurrent: 10, E2BRounds: 3}

// Targets, reported beside the figures and never asserted.
const (
	targetWarmRatio = 3.0
	targetHTTPMs    = 1.0
	targetColdMs    = 60.0
	// targetColdCrunRatio is issue 36's bound on a cold first result
	// against crun's own run to python's 1+1.
	targetColdCrunRatio = 1.3
	targetPoolMs        = 5.0
	targetDensity       = 400.0
	targetGuardMBs      = 50.0
	// targetGuardModelMBs is issue 35's goal for the guard with the entity
	// model on.
	targetGuardModelMBs = 20.0
	densityBudgetByte   = 2 << 30
)

// Cases returns the sandlot figures and the peers, in report order.
func Cases(env Env, sz Sizes) []Case {
	cs := []Case{
		{Name: "warm round trip, Go API", Group: "warm", Run: func(ctx context.Context) ([]Figure, error) { return warmAPI(ctx, env, sz) }},
		chattyCase(env, sz),
		{Name: "warm round trip, HTTP", Group: "warm", Run: func(ctx context.Context) ([]Figure, error) { return warmHTTP(ctx, env, sz) }},
		{Name: "cold create to first result", Group: "create", Run: func(ctx context.Context) ([]Figure, error) { return cold(ctx, env, sz) }},
		{Name: "GetOrCreate from the warm pool", Group: "create", Run: func(ctx context.Context) ([]Figure, error) { return pool(ctx, env, sz) }},
		ipythonCase(env, sz),
		{Name: "throughput and density", Group: "throughput", Run: func(ctx context.Context) ([]Figure, error) { return throughput(ctx, env, sz) }},
		{Name: "guard scan", Group: "guard", Run: func(ctx context.Context) ([]Figure, error) { return guardScan(ctx, env, sz) }},
	}
	cs = append(cs, consoleCases(env, sz)...)
	if sz.E2BSerial > 0 {
		cs = append(cs, e2bSDKCase(env, sz))
	}
	if env.ImageProvider != nil {
		cs = append(cs, imageCases(env, sz)...)
		if env.Volumes != nil {
			cs = append(cs, volumeCase(env, sz))
		}
	}
	if env.ImageCatalog != nil {
		cs = append(cs, stateCases(env, sz)...)
	}
	if env.Runtime == RuntimeRunsc {
		cs = append(cs, runscCases(env, sz)...)
	}
	if env.DesktopProvider != nil && sz.Desktop > 0 {
		cs = append(cs, desktopCases(env, sz)...)
	}
	if sz.Peer > 0 {
		cs = append(cs,
			Case{Name: "peer: Jupyter", Group: "peer", Run: func(ctx context.Context) ([]Figure, error) { return JupyterPeer(ctx, sz.Peer) }},
			Case{Name: "peer: bwrap", Group: "peer", Run: func(ctx context.Context) ([]Figure, error) { return BwrapPeer(ctx, max(sz.Peer/10, 5)) }},
			Case{Name: "peer: crun", Group: "peer", Run: func(ctx context.Context) ([]Figure, error) { return CrunPythonPeer(ctx, max(sz.Peer/10, 5)) }})
	}
	return append(cs, Case{Name: "reference: E2B", Group: "peer", Run: func(context.Context) ([]Figure, error) { return []Figure{E2BReference()}, nil }})
}

// manager starts a Manager over env's provider and a memory store with no
// per-tenant limits and no rotation. The returned stop terminates every
// context it created (destroying the sandboxes) and closes it.
func manager(ctx context.Context, env Env, cfg contexts.Config) (*contexts.Manager, func(), error) {
	if env.Provider == nil {
		return nil, nil, errors.New("no sandbox provider (needs root, an OCI runtime and sandlot-agent)")
	}
	cfg.MaxPerTenant, cfg.MaxPerConversation, cfg.MaxExecutionsPerContext = -1, -1, -1
	if cfg.CleanupInterval == 0 {
		cfg.CleanupInterval = time.Hour
	}
	if cfg.Limits == (contexts.Limits{}) {
		cfg.Limits = env.Limits
	}
	if env.Guard != nil {
		cfg.Guard = env.Guard
	}
	var st contexts.Store = memory.New()
	closeStore := func() {}
	if env.Store != nil {
		var err error
		if st, closeStore, err = env.Store(ctx, "manager"); err != nil {
			return nil, nil, err
		}
	}
	m := contexts.NewManager(st, env.Provider, cfg)
	if err := m.Start(ctx); err != nil {
		closeStore()
		return nil, nil, err
	}
	stop := func() {
		c := context.WithoutCancel(ctx)
		terminateAll(c, m)
		m.Close(c)
		closeStore()
	}
	return m, stop, nil
}

const benchTenant = Tenant

// Tenant is the tenant the bench's contexts belong to.
const Tenant = "bench"

func terminateAll(ctx context.Context, m *contexts.Manager) {
	recs, _ := m.List(ctx, contexts.Filter{TenantID: benchTenant, States: []contexts.State{contexts.StateCreating, contexts.StateReady}, Limit: 1000})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, r := range recs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			m.Terminate(ctx, benchTenant, r.ID, contexts.ReasonDeleted)
		}()
	}
	wg.Wait()
}

func ident(conv string) contexts.Identity {
	return contexts.Identity{TenantID: benchTenant, ConversationID: conv, PathID: "main"}
}

// snippets are the warm round trips: the smallest call that returns a
// value, per language.
var snippets = []struct{ lang, code, want string }{
	{"python", "1+1", "2"},
	{"javascript", "1+1", "2"},
	{"bash", "echo 2", "2\n"},
}

func check(res *contexts.ExecuteResult, want string) error {
	if !res.Success {
		return fmt.Errorf("execution failed: %+v", res.Error)
	}
	got := res.Stdout
	for _, r := range res.Results {
		if r.Main {
			got = r.Text
		}
	}
	if got != want {
		// All of the result: a wrong answer is a fault to chase, not noise.
		return fmt.Errorf("got %q, want %q (stderr %q, exit code %d, execution count %d, kernel restarted %t, timed out %t, state lost %t, %d results, %d ms, sandbox %s)",
			got, want, res.Stderr, res.ExitCode, res.ExecutionCount, res.KernelRestarted, res.TimedOut, res.StateLost, len(res.Results), res.DurationMs, res.SandboxID)
	}
	return nil
}

func warmAPI(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: -1})
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []Figure
	for _, s := range snippets {
		id := ident("warm-" + s.lang)
		req := contexts.ExecuteRequest{Language: s.lang, Code: s.code}
		call := func(ctx context.Context) error {
			res, err := m.Execute(ctx, id, req, nil)
			if err != nil {
				return err
			}
			return check(res, s.want)
		}
		var samples, floor []time.Duration
		if s.lang == "python" { // the row with the floor's goal: judged against a floor taken in turn
			samples, floor, err = TimePaired(ctx, 50, sz.Warm, call)
		} else {
			samples, err = Time(ctx, 50, sz.Warm, call)
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.lang, err)
		}
		name := fmt.Sprintf("warm run_code %s (%s), Go API", s.lang, s.code)
		if s.lang == "python" {
			out = append(out, warmPython(name, samples, floor))
		} else {
			out = append(out, Latency(name, samples))
		}
	}
	parts, err := warmParts(ctx, m, sz)
	return append(out, parts...), err
}

// warmPython is the warm python row, judged against the floor: its
// target is on the ratio to the run's floor (which a repeated run picks
// its median by), and its note gives the ratio to the floor taken in turn
// with its samples. The floor's own p50 rises when other work runs between
// its calls, as it does between a warm call's: the floor taken in turn
// sees what the warm calls see.
func warmPython(name string, samples, floor []time.Duration) Figure {
	f := Latency(name, samples)
	f.MaxRatio = targetWarmRatio
	f.Target = fmt.Sprintf("< %gx floor", targetWarmRatio)
	f.Note = inTurnNote(f, floor)
	return f
}

func warmHTTP(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	if env.HTTPURL == "" {
		return nil, errors.New("no HTTP server")
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	body := []byte(`{"conversationId":"bench-http","args":{"language":"python","code":"1+1"}}`)
	url := env.HTTPURL + "/v1/tools/run_code"
	var buf bytes.Buffer
	samples, err := Time(ctx, 50, sz.HTTP, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-KEY", env.APIKey)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		buf.Reset()
		_, err = io.Copy(&buf, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST /v1/tools/run_code: %s: %s", resp.Status, buf.Bytes())
		}
		if !bytes.Contains(buf.Bytes(), []byte(`"success":true`)) {
			return fmt.Errorf("run_code over HTTP: %s", buf.Bytes())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f := Latency("warm run_code python (1+1), HTTP loopback keep-alive", samples)
	return []Figure{WithTarget(f, fmt.Sprintf("p50 < %g ms", targetHTTPMs), f.P50 < targetHTTPMs)}, nil
}

// coldFirstName is the cold create's row that crun's own run is the floor
// of.
const coldFirstName = "cold create to first result: python 1+1, no pool"

// coldCreateName is the cold create's GetOrCreate row, which the E2B SDK's
// no-pool row is read against.
const coldCreateName = "cold create: GetOrCreate, no pool (sandbox + agent ready)"

// cold measures GetOrCreate + the first python result with no pool: a new
// sandbox, the agent's handshake and the python kernel's start. The
// teardown is not timed.
func cold(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: -1})
	if err != nil {
		return nil, err
	}
	defer stop()
	// The runtime's own run, taken in turn with the creates (crun's under
	// crun, runsc's under runsc): a VM's speed can drift between states
	// minutes apart (the floor's p50 by run has differed 3x), so a peer
	// measured in a case of its own may meet another state than the
	// creates did. Each of the runtime's runs follows a create's teardown,
	// as each create follows one.
	var peer *crunPeer
	var noPeer error
	switch env.Runtime {
	case RuntimeCrun:
		peer, noPeer = newCrunPeer()
	case RuntimeRunsc:
		peer, noPeer = newRunscPeer()
	}
	if peer != nil {
		defer peer.close()
	}
	var create, first, call, own []time.Duration
	for i := 0; i < sz.Cold+1; i++ {
		get, res, err := firstResult(ctx, m, ident(fmt.Sprintf("cold-%d", i)))
		if err != nil {
			return nil, err
		}
		// Interleaved, so both see the same load: the first call creates
		// the context itself, as run_code on a new conversation does.
		one, err := firstCall(ctx, m, ident(fmt.Sprintf("cold-call-%d", i)))
		if err != nil {
			return nil, err
		}
		var floor time.Duration
		if peer != nil {
			if floor, err = peer.sample(ctx); err != nil {
				return nil, err
			}
		}
		if i > 0 { // the first warms the host's page cache
			create, first, call = append(create, get), append(first, res), append(call, one)
			if peer != nil {
				own = append(own, floor)
			}
		}
	}
	fc := Latency(coldCreateName, create)
	ff := Latency(coldFirstName, first)
	f1 := Latency("cold first call: Execute python 1+1 on a new context, no pool (creates it; its kernel starts at boot)", call)
	goal := coldTargetMs(env)
	out := []Figure{fc, WithTarget(ff, fmt.Sprintf("p50 < %g ms", goal), ff.P50 < goal), f1}
	switch env.Runtime {
	case RuntimeCrun:
		out = append(out, coldAgainstCrun(ff, own, noPeer))
	case RuntimeRunsc:
		out = append(out, coldAgainstRunsc(ff, own, noPeer))
	}
	return out, nil
}

// coldAgainstCrunName is the row of the cold first result's ratio to
// crun's own run taken in turn with it.
const coldAgainstCrunName = "cold create to first result: python 1+1, no pool, against crun's own run to python's 1+1 taken in turn (p50 / p50)"

// coldAgainstCrun is the cold first result's p50 over that of crun's own
// run (CrunPythonPeer's container) taken in turn with it, against the
// goal's bound (targetColdCrunRatio); not measured without crun.
func coldAgainstCrun(first Figure, crun []time.Duration, noPeer error) Figure {
	f, r, ok := coldAgainstPeer(coldAgainstCrunName, "crun's run taken in turn", first, crun, noPeer)
	if !ok {
		return f
	}
	return WithTarget(f, fmt.Sprintf("<= %gx", targetColdCrunRatio), r <= targetColdCrunRatio)
}

// coldAgainstRunscName is the row of the cold first result's ratio to
// runsc's own run taken in turn with it (under --runtime runsc).
const coldAgainstRunscName = "cold create to first result: python 1+1, no pool, against runsc's own run to python's 1+1 taken in turn (p50 / p50)"

// coldAgainstRunsc is the cold first result's p50 over that of runsc's own
// run of the peer's container (newRunscPeer) taken in turn with it. It
// carries no goal of its own: it says how much of the runsc cold row is
// runsc's own start, which the row's absolute goal (targetRunscColdMs)
// cannot go below.
func coldAgainstRunsc(first Figure, runs []time.Duration, noPeer error) Figure {
	f, _, ok := coldAgainstPeer(coldAgainstRunscName, "runsc's run taken in turn (sandlot's runsc flags, host /usr, no agent)", first, runs, noPeer)
	if ok {
		f.Note += fmt.Sprintf("; the cold row's goal is %g ms", targetRunscColdMs)
	}
	return f
}

// coldAgainstPeer is row name: first's p50 over that of the runtime's own
// runs (peer says what they were), its note giving both, and the ratio
// unrounded; false with a row that says why it was not measured when
// there are no runs.
func coldAgainstPeer(name, peer string, first Figure, runs []time.Duration, noPeer error) (Figure, float64, bool) {
	if len(runs) == 0 {
		if noPeer == nil {
			noPeer = errors.New("no sample")
		}
		return Figure{Name: name, Note: "not measured: " + noPeer.Error()}, 0, false
	}
	own := Latency("", runs)
	r := first.P50 / own.P50
	return Figure{Name: name, Value: round(r, 2), Unit: "x",
		Note: fmt.Sprintf("%.2fx: the cold first result's p50 %.3f ms over %s, p50 %.3f ms (p95 %.3f ms, n %d)", r, first.P50, peer, own.P50, own.P95, own.N)}, r, true
}

// firstCall times one Execute of python 1+1 on an identity with no
// context: the call creates it. The teardown is not timed.
func firstCall(ctx context.Context, m *contexts.Manager, id contexts.Identity) (time.Duration, error) {
	t0 := time.Now()
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
	if err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if err := check(res, "2"); err != nil {
		return 0, err
	}
	return took, m.Terminate(ctx, benchTenant, res.ContextID, contexts.ReasonDeleted)
}

// firstResult times a new context of id: GetOrCreate alone, and from the
// same start to the first python `1+1` result. The teardown is not timed.
func firstResult(ctx context.Context, m *contexts.Manager, id contexts.Identity) (get, first time.Duration, err error) {
	t0 := time.Now()
	rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{})
	if err != nil {
		return 0, 0, err
	}
	get = time.Since(t0)
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
	if err != nil {
		return 0, 0, err
	}
	if err := check(res, "2"); err != nil {
		return 0, 0, err
	}
	first = time.Since(t0)
	return get, first, m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted)
}

// poolSamples takes n contexts of new identities from a full, settled
// pool of size: GetOrCreate alone and to the first python result. Then,
// for a few more, GetOrCreate alone and how long the pool takes to be full
// again after it (the refill; refills of them, none for 0). The teardown
// is not timed.
func poolSamples(ctx context.Context, m *contexts.Manager, size, n, refills int, prefix string) (acq, first, refill []time.Duration, err error) {
	full := func() error {
		if err := WaitPool(ctx, m, int64(size), 2*time.Minute); err != nil {
			return err
		}
		// A pool normally sits idle between requests: let the refill's
		// prestarted kernel come up and its CPU settle (not timed).
		time.Sleep(150 * time.Millisecond)
		return nil
	}
	hits := m.Stats().PoolHits
	for i := 0; i < n; i++ {
		if err := full(); err != nil {
			return nil, nil, nil, err
		}
		get, res, err := firstResult(ctx, m, ident(fmt.Sprintf("%s-%d", prefix, i)))
		if err != nil {
			return nil, nil, nil, err
		}
		acq, first = append(acq, get), append(first, res)
	}
	if got := m.Stats().PoolHits - hits; got < int64(n) {
		return nil, nil, nil, fmt.Errorf("pool hits %d of %d acquisitions", got, n)
	}
	for i := 0; i < refills; i++ {
		if err := full(); err != nil {
			return nil, nil, nil, err
		}
		t0 := time.Now()
		rec, err := m.GetOrCreate(ctx, ident(fmt.Sprintf("%s-refill-%d", prefix, i)), contexts.CreateOptions{})
		if err != nil {
			return nil, nil, nil, err
		}
		if err := WaitPool(ctx, m, int64(size), 2*time.Minute); err != nil {
			return nil, nil, nil, err
		}
		refill = append(refill, time.Since(t0))
		m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted)
	}
	return acq, first, refill, nil
}

// pool measures GetOrCreate of new identities served from a full, settled
// warm pool; the refill and the teardown are not timed.
func pool(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	const size = 2
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: size})
	if err != nil {
		return nil, err
	}
	defer stop()
	acq, first, _, err := poolSamples(ctx, m, size, sz.Pool, 0, "pool")
	if err != nil {
		return nil, err
	}
	fa := Latency("GetOrCreate from the warm pool", acq)
	ff := Latency("warm pool to first result: python 1+1 (kernel prestarted)", first)
	return []Figure{WithTarget(fa, fmt.Sprintf("p50 < %g ms", targetPoolMs), fa.P50 < targetPoolMs), ff}, nil
}
