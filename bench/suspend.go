package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/contexts"
)

// Goals of the suspend figures (docs/state.md), reported, never asserted.
const (
	targetSuspendedBytes = 1 << 20 // host memory a suspended context holds
	targetWakeMs         = 300.0   // wake to first result
	targetSuspended      = 2000.0  // suspended contexts per 2 GiB
)

// suspendCases are the figures of suspend to disk and fork (docs/state.md)
// on the image provider: a suspend and the wake to the first result
// against the bytes the sandbox wrote, the host memory a suspended
// context holds and how many fit in 2 GiB by it, and a fork onto a path to
// its first result. Where the provider keeps memory (CapMemory: runsc with
// the memory on) the suspend checkpoints and the wake restores; elsewhere
// files only: each figure's name says which.
func suspendCases(env Env, sz Sizes) []Case {
	return []Case{
		{Name: "suspend: suspend, wake to first result, memory held", Group: "state", Run: func(ctx context.Context) ([]Figure, error) {
			return suspendFigures(ctx, env, sz)
		}},
		{Name: "fork: onto a path to first result", Group: "state", Run: func(ctx context.Context) ([]Figure, error) {
			return forkFigures(ctx, env, sz)
		}},
	}
}

// stateManager is a manager over the image provider that keeps images
// (suspends, snapshots) in env's catalog.
func stateManager(ctx context.Context, env Env) (*contexts.Manager, func(), error) {
	if env.ImageCatalog == nil || env.ImageProvider == nil {
		return nil, nil, fmt.Errorf("no template catalog over the image store")
	}
	img := env
	img.Provider = env.ImageProvider
	return manager(ctx, img, contexts.Config{PoolSize: -1, Catalog: env.ImageCatalog})
}

// suspendKind names what a suspend on env's image provider keeps.
func suspendKind(env Env) string {
	if env.ImageProvider != nil && env.ImageProvider.Capabilities().Has(contexts.CapMemory) {
		return "memory kept"
	}
	return "files only"
}

func suspendFigures(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	m, stop, err := stateManager(ctx, env)
	if err != nil {
		return nil, err
	}
	defer stop()
	kind := suspendKind(env)
	n := max(3, min(sz.Cold/5, 10))
	var out []Figure
	for _, mib := range []int{1, 32} {
		var susp, wake []time.Duration
		for i := 0; i < n+1; i++ {
			id := ident(fmt.Sprintf("susp-%d-%d", mib, i))
			rec, err := startWritten(ctx, m, id, mib)
			if err != nil {
				return nil, err
			}
			t0 := time.Now()
			if _, err := m.Suspend(ctx, benchTenant, rec.ID, 0); err != nil {
				return nil, err
			}
			took := time.Since(t0)
			t1 := time.Now()
			res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
			if err != nil {
				return nil, err
			}
			first := time.Since(t1)
			if err := check(res, "2"); err != nil {
				return nil, err
			}
			if !res.Woken && !res.Restored {
				return nil, fmt.Errorf("the call after the suspend did not wake the context")
			}
			m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted)
			if i > 0 { // the first warms the page cache
				susp, wake = append(susp, took), append(wake, first)
			}
		}
		fw := Latency(fmt.Sprintf("suspend (%s): wake to first python result, %d MiB written", kind, mib), wake)
		out = append(out, Latency(fmt.Sprintf("suspend (%s): suspend, %d MiB written", kind, mib), susp),
			WithTarget(fw, fmt.Sprintf("p50 < %g ms", targetWakeMs), fw.P50 < targetWakeMs))
	}
	held, err := suspendedHeld(ctx, env, m, max(5, min(sz.Cold, 20)))
	if err != nil {
		return nil, err
	}
	return append(out, held...), nil
}

// startWritten starts id's context, writes mib MiB to a file in it and
// starts its python kernel, and returns its record.
func startWritten(ctx context.Context, m *contexts.Manager, id contexts.Identity, mib int) (*contexts.Record, error) {
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "bash", Code: fmt.Sprintf("head -c %d /dev/urandom > /home/user/blob && echo 2", mib<<20)}, nil)
	if err != nil {
		return nil, err
	}
	if err := check(res, "2\n"); err != nil {
		return nil, err
	}
	if res, err = m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "x = 41\n1+1"}, nil); err != nil {
		return nil, err
	}
	if err := check(res, "2"); err != nil {
		return nil, err
	}
	return m.Lookup(ctx, id)
}

// suspendedHeld suspends k contexts (python kernel up, 1 MiB written) and
// measures the host memory they hold while suspended: the daemon's heap
// grown per context (its entry, record and image template, after a GC)
// plus what its sandbox still holds (the PSS of any process left in its
// cgroup: none when the sandbox is destroyed or checkpointed). From that,
// how many suspended contexts fit in 2 GiB.
func suspendedHeld(ctx context.Context, env Env, m *contexts.Manager, k int) ([]Figure, error) {
	kind := suspendKind(env)
	// Read twice: the first GC frees what the figures before left (the
	// terminated contexts' entries), so the second is the floor to grow
	// from.
	liveHeap()
	heap := liveHeap
	before := heap()
	var sandbox, layer int64
	var ids []string
	for i := range k {
		rec, err := startWritten(ctx, m, ident(fmt.Sprintf("held-%d", i)), 1)
		if err != nil {
			return nil, err
		}
		out, err := m.Suspend(ctx, benchTenant, rec.ID, 0)
		if err != nil {
			return nil, err
		}
		ids = append(ids, rec.ID)
		listed, err := env.ImageProvider.List(ctx)
		if err != nil {
			return nil, err
		}
		if out.SandboxID != "" && slices.Contains(listed, out.SandboxID) {
			if p, err := sandboxPss(out.SandboxID); err == nil {
				sandbox += p // a process left running: counted
			}
			// Kept with its memory, the sandbox keeps its channel's
			// tmpfs, and its writable layer's unless stowed on disk.
			layer += hostTmpfsBytes(out.SandboxID)
		} else if slices.Contains(listed, rec.SandboxID) {
			return nil, fmt.Errorf("a suspended context's sandbox %s still runs", rec.SandboxID)
		}
	}
	after := heap()
	for _, id := range ids {
		m.Terminate(ctx, benchTenant, id, contexts.ReasonDeleted)
	}
	return heldRows(kind, k, before, after, sandbox, layer), nil
}

// heldRows makes the rows of the host memory k suspended contexts hold
// and how many fit in 2 GiB, from the daemon's live heap before and after
// they were suspended and what their sandboxes' processes and host tmpfs
// mounts hold; a reading heldUnmeasured refuses makes rows that say "not
// measured", with no goal met or missed.
func heldRows(kind string, k int, before, after uint64, sandbox, layer int64) []Figure {
	per, perHeap := heldPerContext(k, before, after, sandbox+layer)
	heldName := fmt.Sprintf("suspend (%s): host memory a suspended context holds, 1 MiB written (mean of %d)", kind, k)
	fitsName := fmt.Sprintf("suspend (%s): suspended contexts per 2 GiB (by the host memory each holds)", kind)
	read := fmt.Sprintf("daemon heap grown per suspended context %.1f KiB (entry, record, image template; live after a GC) + its sandbox's processes' PSS %.1f KiB + its host tmpfs mounts (writable layer, channel) %.1f KiB",
		perHeap/1024, float64(sandbox)/float64(k)/1024, float64(layer)/float64(k)/1024)
	if why := heldUnmeasured(per); why != "" {
		return []Figure{{Name: heldName, Note: why + " (" + read + ")"}, {Name: fitsName, Note: why}}
	}
	held := WithTarget(Figure{Name: heldName, Value: round(per/1024, 1), Unit: "KiB", Note: read},
		"< 1024 KiB", per < targetSuspendedBytes)
	fit := float64(densityBudgetByte) / per
	fits := WithTarget(Figure{Name: fitsName, Value: round(fit, 0), Unit: "contexts",
		Note: "2 GiB / the figure above; the bound is then disk (each keeps its layer as an image) and the tenant limits"},
		fmt.Sprintf(">= %g", targetSuspended), fit >= targetSuspended)
	return []Figure{held, fits}
}

func forkFigures(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	m, stop, err := stateManager(ctx, env)
	if err != nil {
		return nil, err
	}
	defer stop()
	n := max(3, min(sz.Cold/5, 10))
	var fork []time.Duration
	memory := false
	for i := 0; i < n+1; i++ {
		id := ident(fmt.Sprintf("fork-src-%d", i))
		rec, err := startWritten(ctx, m, id, 1)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		fr, err := m.Fork(ctx, benchTenant, rec.ID, "fork")
		if err != nil {
			return nil, err
		}
		res, err := m.Execute(ctx, fr.Context.Identity, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
		if err != nil {
			return nil, err
		}
		took := time.Since(t0)
		if err := check(res, "2"); err != nil {
			return nil, err
		}
		memory = fr.Memory
		m.Terminate(ctx, benchTenant, fr.Context.ID, contexts.ReasonDeleted)
		m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted)
		env.ImageCatalog.Delete(ctx, benchTenant, fr.Snapshot.ID)
		if i > 0 {
			fork = append(fork, took)
		}
	}
	kind := "files only"
	if memory {
		kind = "memory kept"
	}
	return []Figure{Latency(fmt.Sprintf("fork (%s): onto a path to first python result, 1 MiB written", kind), fork)}, nil
}

// hostTmpfsBytes is the space used on the host tmpfs mounts of sandbox
// id (runtime/oci): its writable layer's (<share>/roots/<id>, unless a
// checkpoint stowed it on disk) and its channel's (<state>/chan/<id>); 0
// when none is mounted.
func hostTmpfsBytes(id string) int64 {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !(strings.HasSuffix(f[4], "/roots/"+id) || strings.HasSuffix(f[4], "/chan/"+id)) {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(f[4], &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			continue
		}
		n += int64(st.Blocks-st.Bfree) * st.Bsize
	}
	return n
}
