package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// Goals of gVisor's row (issue 36): a create to its first result and the
// idle contexts that fit in 2 GiB. runsc's own start (three Go processes
// per sandbox) and its sentry's memory miss both cold (BENCHMARKS.md,
// Notes), so the runsc cases show what sandlot offers instead: a create
// served by the warm pool, and idle contexts suspended with their memory.
const (
	targetRunscColdMs  = 150.0
	targetRunscDensity = 150.0
)

// RuntimeRunsc is Env.Runtime's name of gVisor.
const RuntimeRunsc = "runsc"

// RuntimeCrun is Env.Runtime's name of crun, whose own run is the cold
// create's floor (crunpeer.go).
const RuntimeCrun = "crun"

// coldTargetMs and densityTarget are the cold rows' goals on env's
// runtime: gVisor has its own (issue 36's row), the others crun's.
func coldTargetMs(env Env) float64 {
	if env.Runtime == RuntimeRunsc {
		return targetRunscColdMs
	}
	return targetColdMs
}

func densityTarget(env Env) float64 {
	if env.Runtime == RuntimeRunsc {
		return targetRunscDensity
	}
	return targetDensity
}

// runscCases are gVisor's row measured the way sandlot meets it: a create
// from the warm pool (on the host-root provider, as the cold rows) and
// idle contexts suspended by the manager's idle suspend with their memory
// (on the image provider, as serve runs). Only with --runtime runsc.
func runscCases(env Env, sz Sizes) []Case {
	return []Case{
		{Name: "runsc: create from the warm pool to first python result", Group: "runsc", Run: func(ctx context.Context) ([]Figure, error) {
			return runscPool(ctx, env, sz)
		}},
		{Name: "runsc: idle contexts with idle suspend (memory kept)", Group: "runsc", Run: func(ctx context.Context) ([]Figure, error) {
			return runscIdle(ctx, env, sz)
		}},
	}
}

func runscPool(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	const size = 2
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: size})
	if err != nil {
		return nil, err
	}
	defer stop()
	acq, first, refill, err := poolSamples(ctx, m, size, sz.Pool, max(3, min(sz.Pool/3, 10)), "runsc-pool")
	if err != nil {
		return nil, err
	}
	fa := Latency("runsc: GetOrCreate from the warm pool", acq)
	ff := Latency("runsc: create from the warm pool to first python result (kernel prestarted)", first)
	ff.Note = "the pool's sandboxes were made ahead; a create that finds the pool empty is a cold one (the cold rows)"
	fr := Latency(fmt.Sprintf("runsc: the warm pool's refill of one sandbox (pool of %d, the rate a burst is served at once it is drained)", size), refill)
	return []Figure{fa, WithTarget(ff, fmt.Sprintf("p50 < %g ms", targetRunscColdMs), ff.P50 < targetRunscColdMs), fr}, nil
}

// runscIdle: k contexts (python kernel up holding a variable) left idle
// under an idle suspend of one second, on the image provider with the
// warm pool serving their creates, as serve runs a tenant or template
// with IdleSuspendSeconds. The manager's own cleanup loop must suspend
// them all with their memory; then the host memory each holds, measured
// as the suspend rows do (suspendedHeld), how many fit in 2 GiB by it, and
// the wake of each by its next call to the first result, which must see
// its variable.
func runscIdle(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	if env.ImageCatalog == nil || env.ImageProvider == nil {
		return nil, fmt.Errorf("no template catalog over the image store (--images-dir)")
	}
	if !env.ImageProvider.Capabilities().Has(contexts.CapMemory) {
		return nil, fmt.Errorf("the image provider keeps no memory on a suspend (--suspend-memory=false, or the state dir is not on a disk)")
	}
	const (
		idleFor = time.Second
		size    = 2
	)
	img := env
	img.Provider = env.ImageProvider
	// The idle suspend runs in the cleanup pass (serve's default: every
	// 60 s; here a second, so it comes soon after the idle time).
	warns := newWarnLog() // what the failure below says the manager met
	m, stop, err := manager(ctx, img, contexts.Config{PoolSize: size, Catalog: env.ImageCatalog,
		CleanupInterval: time.Second, Logger: warns.Logger(),
		IdleSuspendOf: func(context.Context, string, string) time.Duration { return idleFor }})
	if err != nil {
		return nil, err
	}
	defer stop()
	k := max(5, min(sz.Cold, 20))
	waitPool := func() error { return WaitPool(ctx, m, int64(size), 2*time.Minute) }
	if err := waitPool(); err != nil {
		return nil, err
	}
	// Read as the suspend rows read it (suspendedHeld): the live heap a
	// forced GC finds, after a first GC that settles what the cases
	// before left. HeapAlloc after a GC also counted what other
	// goroutines (the cleanup loop, the pool's worker) allocated since,
	// and once read less after the five suspends than before them.
	liveHeap()
	before := liveHeap()
	hits := m.Stats().PoolHits
	var recs []*contexts.Record
	for i := range k {
		id := ident(fmt.Sprintf("runsc-idle-%d", i))
		res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: fmt.Sprintf("x = %d\n1+1", 40+i)}, nil)
		if err != nil {
			return nil, err
		}
		if err := check(res, "2"); err != nil {
			return nil, err
		}
		rec, err := m.Lookup(ctx, id)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	poolHits := m.Stats().PoolHits - hits
	// The cleanup loop suspends each once it has been idle idleFor. A
	// checkpoint takes 0.3-1 s on a quiet host and many times that on a
	// loaded one: the wait lasts while suspends go on landing (a minute
	// and a half without one fails), within k minutes and two in all.
	t0 := time.Now()
	progress, lastN := t0, 0
	var suspended []*contexts.Record
	for {
		suspended = suspended[:0]
		for _, r := range recs {
			got, err := m.Get(ctx, benchTenant, r.ID)
			if err != nil {
				return nil, err
			}
			if got.Suspended() {
				suspended = append(suspended, got)
			}
		}
		if len(suspended) == k {
			break
		}
		if len(suspended) > lastN {
			progress, lastN = time.Now(), len(suspended)
		}
		if time.Since(progress) > 90*time.Second || time.Since(t0) > time.Duration(k)*time.Minute+2*time.Minute {
			return nil, fmt.Errorf("the idle suspend suspended %d of %d contexts idle %v in %v; not suspended: %s; the manager's last warnings: %q",
				len(suspended), k, idleFor, time.Since(t0).Round(time.Second), unsuspended(ctx, m, recs), warns)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fired := time.Since(t0)
	if err := waitPool(); err != nil {
		return nil, err
	}
	liveHeap()
	after := liveHeap()
	listed, err := env.ImageProvider.List(ctx)
	if err != nil {
		return nil, err
	}
	var sandbox, tmpfs int64
	kept := 0
	for _, r := range suspended {
		if !r.KeepsMemory() {
			continue
		}
		kept++
		if slices.Contains(listed, r.SandboxID) {
			if p, err := sandboxPss(r.SandboxID); err == nil {
				sandbox += p // a process left running: counted
			}
			tmpfs += hostTmpfsBytes(r.SandboxID)
		}
	}
	if kept < k {
		return nil, fmt.Errorf("%d of %d idle-suspended contexts kept their memory", kept, k)
	}
	var wake []time.Duration
	for i, r := range recs {
		t1 := time.Now()
		res, err := m.Execute(ctx, r.Identity, contexts.ExecuteRequest{Language: "python", Code: "x + 1"}, nil)
		if err != nil {
			return nil, err
		}
		took := time.Since(t1)
		if err := check(res, fmt.Sprint(41+i)); err != nil {
			return nil, fmt.Errorf("the wake of an idle-suspended context lost its variable: %w", err)
		}
		if !res.Woken && !res.Restored {
			return nil, errors.New("the call after the idle suspend did not wake the context")
		}
		wake = append(wake, took)
		m.Terminate(ctx, benchTenant, r.ID, contexts.ReasonDeleted)
	}
	note := fmt.Sprintf("idle suspend %v; the cleanup loop suspended all %d with their memory within %.1f s of the last one's last call; %d of %d created from the warm pool", idleFor, k, fired.Seconds(), poolHits, k)
	held, fits := suspendedRows(k, before, after, sandbox, tmpfs, note)
	fw := Latency("runsc: wake of an idle-suspended context to first python result (its variable kept)", wake)
	return []Figure{held, fits, WithTarget(fw, fmt.Sprintf("p50 < %g ms", targetWakeMs), fw.P50 < targetWakeMs)}, nil
}

// suspendedRows makes the rows of the host memory k idle-suspended
// contexts hold and how many fit in 2 GiB, from the daemon's heap before
// and after they were suspended and what their sandboxes' processes and
// host tmpfs mounts hold.
func suspendedRows(k int, before, after uint64, sandbox, tmpfs int64, note string) (held, fits Figure) {
	per, perHeap := heldPerContext(k, before, after, sandbox+tmpfs)
	heldName := fmt.Sprintf("runsc: host memory an idle-suspended context holds, python kernel up (memory kept, mean of %d)", k)
	fitsName := "runsc: idle contexts per 2 GiB with idle suspend (memory kept)"
	// Left out of the figure: the kernel's own memory for the sandbox's
	// mounts and namespaces, and the page cache of its checkpoint image.
	leftOut := "not counted: the host kernel's memory for its mounts and namespaces, the page cache of its checkpoint image"
	heapNote := fmt.Sprintf("daemon heap grown per context %.1f KiB", perHeap/1024)
	if after <= before {
		heapNote = "daemon heap not grown between the reads (the GC shrank it): counted 0"
	}
	if why := heldUnmeasured(per); why != "" {
		// Nothing measured held anything (the heap shrank between the
		// reads and no process or tmpfs was left), or less than a
		// record: 2 GiB over it would read as billions of contexts
		// "met"; say the row was not measured.
		why = fmt.Sprintf("%s (%s, no process or tmpfs left); %s", why, heapNote, note)
		held = Figure{Name: heldName, Note: why}
		fits = Figure{Name: fitsName, Note: why}
	} else {
		held = Figure{Name: heldName, Value: round(per/1024, 1), Unit: "KiB",
			Note: fmt.Sprintf("%s + its sandbox's processes' PSS %.1f KiB + its host tmpfs mounts %.1f KiB (%s); %s",
				heapNote, float64(sandbox)/float64(k)/1024, float64(tmpfs)/float64(k)/1024, leftOut, note)}
		fit := float64(densityBudgetByte) / per
		fits = WithTarget(Figure{Name: fitsName, Value: round(fit, 0), Unit: "contexts",
			Note: "2 GiB / the figure above (so without what it leaves out), for contexts idle past their idle suspend; one idle for less holds a running sandbox (the density rows); the checkpoints are on disk"},
			fmt.Sprintf(">= %g", targetRunscDensity), fit >= targetRunscDensity)
	}
	return held, fits
}

// unsuspended describes the contexts of recs that are not suspended (their
// state, sandbox, last use and expiry, and the manager's own copy where it
// differs), for the failure of a wait for the idle suspend.
func unsuspended(ctx context.Context, m *contexts.Manager, recs []*contexts.Record) string {
	var out []string
	for _, r := range recs {
		got, err := m.Get(ctx, benchTenant, r.ID)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: %v", r.ID, err))
		case !got.Suspended():
			line := fmt.Sprintf("%s: state %s, sandbox %s, paused %v, last used %v ago, expires in %v",
				got.ID, got.State, got.SandboxID, got.Paused(), time.Since(got.LastUsedAt).Round(time.Millisecond), time.Until(got.ExpiresAt).Round(time.Second))
			// The manager's own copy, where it differs from the store's:
			// a suspend saved in memory whose store write failed.
			if mine, err := m.Served(ctx, benchTenant, r.ID); err == nil && (mine.Suspended() || mine.Paused() || mine.State != got.State) {
				line += fmt.Sprintf(" (the manager's copy: state %s, sandbox %s, paused %v, suspended %v)", mine.State, mine.SandboxID, mine.Paused(), mine.Suspended())
			}
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}
