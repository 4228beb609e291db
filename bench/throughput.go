package bench

// The throughput and density case: executions per second on n contexts at
// once, then the memory those contexts hold idle.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// throughput runs python 1+1 in a loop on each of n contexts at once and
// counts executions per second; after the largest level it measures the
// density of those contexts, idle with their python kernel started.
func throughput(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: -1})
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []Figure
	var ids []contexts.Identity
	req := contexts.ExecuteRequest{Language: "python", Code: "1+1"}
	for _, n := range sz.Concurrency {
		// Grow to n contexts, two creations at a time, each with its kernel up.
		var mu sync.Mutex
		var firstErr error
		sem := make(chan struct{}, 2)
		var wg sync.WaitGroup
		for i := len(ids); i < n; i++ {
			id := ident(fmt.Sprintf("tp-%d", i))
			ids = append(ids, id)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if _, err := m.Execute(ctx, id, req, nil); err != nil {
					mu.Lock()
					firstErr = cmp(firstErr, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return out, fmt.Errorf("create %d contexts: %w", n, firstErr)
		}
		var (
			count   int64
			samples []time.Duration
		)
		deadline := time.Now().Add(sz.Throughput)
		start := time.Now()
		for _, id := range ids[:n] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []time.Duration
				for time.Now().Before(deadline) && ctx.Err() == nil {
					t0 := time.Now()
					res, err := m.Execute(ctx, id, req, nil)
					if err == nil {
						err = check(res, "2")
					}
					if err != nil {
						mu.Lock()
						firstErr = cmp(firstErr, err)
						mu.Unlock()
						return
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				count += int64(len(local))
				samples = append(samples, local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		el := time.Since(start)
		if firstErr != nil {
			return out, fmt.Errorf("throughput with %d contexts: %w", n, firstErr)
		}
		out = append(out, throughputFigure(n, samples, count, el))
	}
	ds, err := density(ctx, m, env, ids)
	return append(out, ds...), err
}

// targetTailContexts is the level whose tail has a goal: at 50 contexts
// at once, p99 under targetTailP99Ms.
const (
	targetTailContexts = 50
	targetTailP99Ms    = 50
)

// throughputFigure is the row of n contexts at once: its calls' latency
// and executions per second, with the tail's goal at its level.
func throughputFigure(n int, samples []time.Duration, count int64, el time.Duration) Figure {
	f := Latency(fmt.Sprintf("throughput: python 1+1 on %d contexts at once (latency)", n), samples)
	f.Value, f.Unit = round(float64(count)/el.Seconds(), 0), "exec/s"
	if n == targetTailContexts {
		f = WithTarget(f, fmt.Sprintf("p99 < %d ms", targetTailP99Ms), f.P99 < targetTailP99Ms)
		f.onP99 = true
	}
	return f
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// density sums, over idle contexts, the proportional set size of every
// process in each sandbox's cgroup (smaps_rollup Pss) and, when the
// provider samples it, the cgroup's memory usage (which adds page cache
// and the tmpfs home). Contexts per 2 GiB divides by the PSS.
func density(ctx context.Context, m *contexts.Manager, env Env, ids []contexts.Identity) ([]Figure, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	time.Sleep(500 * time.Millisecond) // let the last calls settle
	var pss, cg, nCg int64
	for _, id := range ids {
		rec, err := m.Lookup(ctx, id)
		if err != nil {
			return nil, err
		}
		p, err := sandboxPss(rec.SandboxID)
		if err != nil {
			return nil, fmt.Errorf("density: %w", err)
		}
		pss += p
		if env.Usage != nil {
			if u, err := env.Usage.Usage(ctx, rec.SandboxID); err == nil {
				cg += u.MemoryBytes
				nCg++
			}
		}
	}
	per := float64(pss) / float64(len(ids))
	const mib = 1 << 20
	out := []Figure{{Name: fmt.Sprintf("density: PSS per idle context (python kernel up, mean of %d)", len(ids)),
		Value: round(per/mib, 1), Unit: "MiB"}}
	if nCg > 0 {
		out = append(out, Figure{Name: "density: cgroup memory per idle context (incl. page cache, tmpfs)",
			Value: round(float64(cg)/float64(nCg)/mib, 1), Unit: "MiB"})
	}
	fit := float64(densityBudgetByte) / per
	out = append(out, WithTarget(Figure{Name: "density: idle contexts per 2 GiB (by PSS, python kernel up)", Value: round(fit, 0), Unit: "contexts"},
		fmt.Sprintf(">= %g", densityTarget(env)), fit >= densityTarget(env)))

	// The same for contexts that never ran code: the agent alone (kernels
	// start on first use).
	k := min(10, len(ids))
	pss = 0
	for i := 0; i < k; i++ {
		rec, err := m.GetOrCreate(ctx, ident(fmt.Sprintf("idle-%d", i)), contexts.CreateOptions{})
		if err != nil {
			return out, err
		}
		defer m.Terminate(context.WithoutCancel(ctx), benchTenant, rec.ID, contexts.ReasonDeleted)
		p, err := sandboxPss(rec.SandboxID)
		if err != nil {
			return out, fmt.Errorf("density: %w", err)
		}
		pss += p
	}
	per = float64(pss) / float64(k)
	out = append(out,
		Figure{Name: fmt.Sprintf("density: PSS per idle context, no kernel started (mean of %d)", k), Value: round(per/mib, 1), Unit: "MiB"},
		Figure{Name: "density: idle contexts per 2 GiB (by PSS, no kernel started)", Value: round(float64(densityBudgetByte)/per, 0), Unit: "contexts"})
	return out, nil
}

// sandboxPss is the summed Pss of the processes in sandbox id's cgroup.
func sandboxPss(id string) (int64, error) {
	var procs []byte
	var err error
	for _, d := range []string{"/sys/fs/cgroup/pids/sandlot", "/sys/fs/cgroup/memory/sandlot", "/sys/fs/cgroup/sandlot", "/sys/fs/cgroup/unified/sandlot"} {
		procs, err = os.ReadFile(filepath.Join(d, id, "cgroup.procs"))
		if err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("sandbox %s: no cgroup.procs: %w", id, err)
	}
	var total int64
	for _, f := range strings.Fields(string(procs)) {
		p, err := pss(f)
		if err != nil {
			continue // exited
		}
		total += p
	}
	if total == 0 {
		return 0, fmt.Errorf("sandbox %s: no processes", id)
	}
	return total, nil
}

func pss(pid string) (int64, error) {
	f, err := os.Open("/proc/" + pid + "/smaps_rollup")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no Pss line")
}
