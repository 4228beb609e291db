package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// targetDesktopCreateMs is the goal for a desktop from nothing to its
// first screenshot on crun.
const targetDesktopCreateMs = 3000

// desktopCases are the desktop sandboxes' figures (Env.DesktopProvider,
// the desktop image): a session from nothing to its first screenshot,
// cold and from the warm pool of started desktops, one action and one
// screenshot on a running desktop, and its memory with the browser up.
func desktopCases(env Env, sz Sizes) []Case {
	d := env
	d.Provider, d.Usage = env.DesktopProvider, env.DesktopUsage
	return []Case{
		{Name: "desktop: create to first screenshot, cold", Group: "desktop", Run: func(ctx context.Context) ([]Figure, error) {
			return desktopCreate(ctx, d, sz.Desktop, 0)
		}},
		{Name: "desktop: create to first screenshot, from the warm pool", Group: "desktop", Run: func(ctx context.Context) ([]Figure, error) {
			return desktopCreate(ctx, d, sz.Desktop, 1)
		}},
		{Name: "desktop: action and screenshot latency, memory", Group: "desktop", Run: func(ctx context.Context) ([]Figure, error) {
			return desktopActions(ctx, d, sz.Desktop*5)
		}},
	}
}

// desktopManager is a desktop manager over a contexts manager of env's
// provider, with a warm pool of pool started desktops (0: none). A
// refill's warm-up (X, XFCE, noVNC) waits while hold is locked, so that a
// timed create never shares the cores with the next warm desktop's start.
func desktopManager(ctx context.Context, env Env, pool int, hold *sync.Mutex) (*desktop.Manager, *contexts.Manager, func(), error) {
	// A desktop's limits are its template's (what serve gives it), not
	// the bench's --sandbox-memory sized for density: XFCE, the drawing
	// check and Chromium outgrow 256 MiB, and the OOM killer then took
	// the X server or the session.
	r := desktop.Resources
	cfg := contexts.Config{PoolSize: -1, Catalog: env.DesktopCatalog,
		Limits: contexts.Limits{MemoryBytes: r.MemoryBytes, PIDs: r.PIDs, DiskBytes: r.DiskBytes}}
	// The spec with or without a pool, as the daemon sets it: a cold
	// create is started (and drawn) by its warm-up too.
	spec := desktop.PoolSpec(pool, desktop.Config{})
	if pool > 0 {
		// Named in PoolSizes, the pool fills at Start (else only after the
		// template's first create).
		if warm := spec.Warm; hold != nil {
			spec.Warm = func(ctx context.Context, sb contexts.Sandbox) error {
				if ctx.Value(timedCreate{}) != nil {
					return warm(ctx, sb) // the timed create's own (a miss): not a refill
				}
				hold.Lock()
				hold.Unlock() // a gate only: the timed create has ended
				return warm(ctx, sb)
			}
		}
		cfg.PoolSizes = map[string]int{desktop.Template: pool}
	}
	cfg.PoolSpecs = map[string]contexts.PoolSpec{desktop.Template: spec}
	m, stop, err := manager(ctx, env, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return desktop.New(desktop.Config{Contexts: m}), m, stop, nil
}

// desktopCreate times n sessions from nothing to their first screenshot,
// each alone on the machine: cold without a pool, or from a full pool
// whose refill waits until the sample is taken; each session is ended
// before the next (its browser would otherwise start beside the next
// sample). Beside the total it reports when each part of the desktop
// started and answered, from the create's start (Manager.Timeline).
func desktopCreate(ctx context.Context, env Env, n, pool int) ([]Figure, error) {
	var hold sync.Mutex
	dm, m, stop, err := desktopManager(ctx, env, pool, &hold)
	if err != nil {
		return nil, err
	}
	defer stop()
	kind := "cold"
	if pool > 0 {
		kind = "from the warm pool"
	}
	samples := make([]time.Duration, 0, n)
	phases := map[string][]time.Duration{}
	ranOut := 0 // pooled: warm-ups whose wait for the drawing ran out before the take
	for i := range n {
		if pool > 0 {
			if err := waitPool(ctx, m, pool); err != nil {
				return nil, err
			}
		}
		id := ident(fmt.Sprintf("desktop-create-%d-%d", pool, i))
		hold.Lock()
		t0 := time.Now()
		_, err := dm.Screenshot(context.WithValue(ctx, timedCreate{}, true), id)
		took := time.Since(t0)
		hold.Unlock()
		if err != nil {
			return nil, err
		}
		samples = append(samples, took)
		out, err := desktopPhases(ctx, dm, id, t0, phases)
		if err != nil {
			return nil, err
		}
		if out {
			ranOut++
		}
		if err := endDesktop(ctx, m, id); err != nil {
			return nil, err
		}
	}
	f := Latency("desktop: create to first screenshot, "+kind, samples)
	if pool > 0 {
		f.Note = fmt.Sprintf("%d of %d taken undrawn (their warm-up's wait for the drawing ran out)", ranOut, n)
	}
	return append([]Figure{WithTarget(f, "< 3000 ms", f.P50 < targetDesktopCreateMs)}, phaseFigures(kind, phases)...), nil
}

// timedCreate marks the context of a timed create: its own warm-up (on a
// miss) is not a refill, and must not wait for the gate it holds.
type timedCreate struct{}

// endDesktop terminates the desktop session of id (and waits for it).
func endDesktop(ctx context.Context, m *contexts.Manager, id contexts.Identity) error {
	id.PathID = desktop.PathPrefix + id.PathID
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		return err
	}
	return m.Terminate(ctx, id.TenantID, rec.ID, contexts.ReasonDeleted)
}

// waitPool waits (at most 5 minutes) until the desktop pool holds n.
func waitPool(ctx context.Context, m *contexts.Manager, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for m.Stats().PerTemplate[desktop.Template].PoolSize < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the desktop pool did not fill in 5 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// desktopActions opens one desktop, waits until its browser answers,
// then times n pointer moves and n screenshots and samples its memory.
func desktopActions(ctx context.Context, env Env, n int) ([]Figure, error) {
	dm, m, stop, err := desktopManager(ctx, env, 0, nil)
	if err != nil {
		return nil, err
	}
	defer stop()
	id := ident("desktop-actions")
	for deadline := time.Now().Add(3 * time.Minute); ; {
		h, err := dm.Health(ctx, id)
		if err != nil {
			return nil, err
		}
		if h.OK() {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the desktop did not become healthy in 3 minutes: %+v", h)
		}
		time.Sleep(time.Second)
	}
	i := 0
	moves, err := Time(ctx, 1, n, func(ctx context.Context) error {
		i++
		_, err := dm.Act(ctx, id, desktop.Action{Kind: "move", X: i % 1000, Y: i % 700})
		return err
	})
	if err != nil {
		return nil, err
	}
	shots, err := Time(ctx, 1, n, func(ctx context.Context) error {
		_, err := dm.Screenshot(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := []Figure{Latency("desktop: action (pointer move)", moves), Latency("desktop: screenshot (scrot, PNG read back)", shots)}
	if env.Usage != nil {
		rec, err := m.Lookup(ctx, contexts.Identity{TenantID: id.TenantID, ConversationID: id.ConversationID, PathID: desktop.PathPrefix + contexts.DefaultPath})
		if err != nil {
			return nil, err
		}
		if u, err := env.Usage.Usage(ctx, rec.SandboxID); err == nil {
			out = append(out, Figure{Name: "desktop: memory of one running desktop, browser answering (cgroup)", Value: round(float64(u.MemoryBytes)/(1<<20), 1), Unit: "MiB",
				Note: fmt.Sprintf("%d tasks", u.PIDs)})
		}
	}
	return out, nil
}
