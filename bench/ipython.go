package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// ipythonCase measures the python kernel's IPython mode (a cell run
// through IPython's InteractiveShell) beside the plain kernel in the same
// run: the first result of a new sandbox (no pool), the first result from
// a warm pool whose kernels prestart with IPython imported, the warm
// per-cell round trip, and the memory of an idle sandbox with each kernel.
func ipythonCase(env Env, sz Sizes) Case {
	return Case{Name: "python kernel with IPython: cold first result / per-cell", Group: "ipython", Run: func(ctx context.Context) ([]Figure, error) {
		return ipythonFigures(ctx, env, sz)
	}}
}

func ipythonFigures(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: -1})
	if err != nil {
		return nil, err
	}
	defer stop()
	n := max(sz.Cold/3, 3)
	var plainFirst, ipyFirst []time.Duration
	for i := 0; i < n+1; i++ {
		for _, ipy := range []bool{false, true} {
			id := ident(fmt.Sprintf("ipy-cold-%d-%t", i, ipy))
			d, err := timeFirst(ctx, m, id, contexts.ExecuteRequest{Language: agent.Python, Code: "1+1", IPython: ipy})
			if err != nil {
				return nil, fmt.Errorf("cold (ipython %t): %w", ipy, err)
			}
			if i == 0 { // the first of each warms the host's page cache
				continue
			}
			if ipy {
				ipyFirst = append(ipyFirst, d)
			} else {
				plainFirst = append(plainFirst, d)
			}
		}
	}
	out := []Figure{
		Latency("cold create to first result: python 1+1, plain kernel, no pool", plainFirst),
		Latency("cold create to first result: python 1+1, IPython, no pool (IPython imported on the first cell)", ipyFirst),
	}

	prestarted, err := ipythonPool(ctx, env, max(sz.Pool/3, 3))
	if err != nil {
		return out, err
	}
	out = append(out, Latency("warm pool to first result: python 1+1, IPython (kernel prestarted with IPython imported)", prestarted))

	warm := max(sz.Warm/3, 20)
	id := ident("ipy-warm")
	for _, ipy := range []bool{false, true} {
		req := contexts.ExecuteRequest{Language: agent.Python, Code: "1+1", IPython: ipy}
		samples, err := Time(ctx, 20, warm, func(ctx context.Context) error {
			res, err := m.Execute(ctx, id, req, nil)
			if err != nil {
				return err
			}
			return check(res, "2")
		})
		if err != nil {
			return out, fmt.Errorf("warm (ipython %t): %w", ipy, err)
		}
		name := "per cell: warm run_code python (1+1), plain kernel, Go API"
		if ipy {
			name = "per cell: warm run_code python (1+1), IPython, Go API"
		}
		out = append(out, Latency(name, samples))
	}

	// Memory: one idle sandbox per mode, its kernel up.
	const mib = 1 << 20
	for _, ipy := range []bool{false, true} {
		mid := ident(fmt.Sprintf("ipy-mem-%t", ipy))
		if _, err := m.Execute(ctx, mid, contexts.ExecuteRequest{Language: agent.Python, Code: "1+1", IPython: ipy}, nil); err != nil {
			return out, err
		}
		time.Sleep(300 * time.Millisecond)
		rec, err := m.Lookup(ctx, mid)
		if err != nil {
			return out, err
		}
		p, err := sandboxPss(rec.SandboxID)
		if err != nil {
			return out, err
		}
		name := "PSS of an idle sandbox, plain python kernel up"
		if ipy {
			name = "PSS of an idle sandbox, python kernel up with IPython"
		}
		out = append(out, Figure{Name: name, Value: round(float64(p)/mib, 1), Unit: "MiB"})
	}
	return out, nil
}

// timeFirst is GetOrCreate of a new context plus its first result; the
// teardown is not timed.
func timeFirst(ctx context.Context, m *contexts.Manager, id contexts.Identity, req contexts.ExecuteRequest) (time.Duration, error) {
	t0 := time.Now()
	rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{})
	if err != nil {
		return 0, err
	}
	res, err := m.Execute(ctx, id, req, nil)
	if err != nil {
		return 0, err
	}
	if err := check(res, "2"); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	return d, m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted)
}

// ipythonPool times the first IPython result of contexts served from a
// warm pool whose sandboxes prestart "ipython"; the pool is refilled and
// left to settle (the import done) before each, untimed.
func ipythonPool(ctx context.Context, env Env, n int) ([]time.Duration, error) {
	const size = 1
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: size, PoolPrestart: []string{agent.PrestartIPython}})
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []time.Duration
	for i := 0; i < n; i++ {
		if err := WaitPool(ctx, m, int64(size), time.Minute); err != nil {
			return nil, err
		}
		time.Sleep(3 * time.Second) // a pool sits idle: the prestart's import is done
		d, err := timeFirst(ctx, m, ident(fmt.Sprintf("ipy-pool-%d", i)), contexts.ExecuteRequest{Language: agent.Python, Code: "1+1", IPython: true})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if st := m.Stats(); st.PoolHits < int64(n) {
		return nil, fmt.Errorf("pool hits %d of %d acquisitions", st.PoolHits, n)
	}
	return out, nil
}
