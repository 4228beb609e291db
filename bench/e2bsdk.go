package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// The E2B SDK figures: the official E2B JavaScript SDK (the e2e suite's
// node_modules, e2e/e2b) against sandlot's E2B surface on an in-process
// daemon, as an E2B user meets it: Sandbox.create() and a first
// commands.run('echo ok'), in a row with the default warm pool and with
// none, in a burst of creates kept alive, and several at once.

//go:embed e2bsdk.mjs
var e2bScript []byte

// E2BServer is a daemon serving the E2B surface for the E2B SDK figures.
type E2BServer struct {
	URL, Key string
	// PoolStats, when set, returns the daemon's warm pool hits and misses
	// so far.
	PoolStats func() (hits, misses int64)
	Stop      func()
}

// E2BServers starts a daemon for the E2B SDK figures: with the default
// warm pool (pool) or with none.
type E2BServers func(ctx context.Context, pool bool) (*E2BServer, error)

// e2bSDKCase measures the E2B SDK figures when node and the SDK are there.
func e2bSDKCase(env Env, sz Sizes) Case {
	return Case{Name: "E2B SDK: create and echo", Group: "e2b", Run: func(ctx context.Context) ([]Figure, error) {
		return e2bSDK(ctx, env, sz)
	}}
}

// E2BSDKDir finds the directory whose node_modules holds the E2B SDK:
// dir when given, else the e2e suite's (e2e/e2b) under the working
// directory or one of its parents. The path is absolute: node resolves
// the SDK from it (createRequire takes absolute paths only), in a
// working directory of its own.
func E2BSDKDir(dir string) (string, error) {
	has := func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "node_modules", "e2b", "package.json"))
		return err == nil
	}
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		if dir = abs; !has(dir) {
			return "", fmt.Errorf("no E2B SDK in %s (node_modules/e2b; npm ci there)", dir)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if c := filepath.Join(d, "e2e", "e2b"); has(c) {
			return c, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no E2B SDK found (e2e/e2b/node_modules: `npm ci` in e2e/e2b, or --e2b-sdk DIR)")
		}
	}
}

func e2bSDK(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	if env.E2B == nil {
		return nil, errors.New("no E2B server")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not installed")
	}
	dir, err := E2BSDKDir(env.E2BSDKDir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "sandlot-bench-e2b-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "e2bsdk.mjs")
	if err := os.WriteFile(script, e2bScript, 0o600); err != nil {
		return nil, err
	}
	run := func(pool bool, serial, burst, conc int) (map[string][]float64, int64, int64, error) {
		srv, err := env.E2B(ctx, pool)
		if err != nil {
			return nil, 0, 0, err
		}
		defer srv.Stop()
		var h0, m0 int64
		if srv.PoolStats != nil {
			h0, m0 = srv.PoolStats()
		}
		cmd := exec.CommandContext(ctx, node, script)
		cmd.Env = append(os.Environ(), "E2B_API_KEY="+srv.Key, "E2B_API_URL="+srv.URL, "E2B_SANDBOX_URL="+srv.URL, "E2B_DEBUG=",
			"E2B_BENCH_SDK_DIR="+dir, "E2B_BENCH_SERIAL="+strconv.Itoa(serial), "E2B_BENCH_BURST="+strconv.Itoa(burst),
			"E2B_BENCH_CONCURRENT="+strconv.Itoa(conc), "E2B_BENCH_ROUNDS="+strconv.Itoa(sz.E2BRounds))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, 0, 0, fmt.Errorf("node %s: %v: %.2000s", filepath.Base(script), err, stderr.String())
		}
		var out struct {
			Series map[string][]float64 `json:"series"`
			Parts  map[string][]float64 `json:"parts"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			return nil, 0, 0, fmt.Errorf("node's report: %v: %.500s", err, stdout.String())
		}
		var h, m int64
		if srv.PoolStats != nil {
			h1, m1 := srv.PoolStats()
			h, m = h1-h0, m1-m0
		}
		for k, v := range out.Parts {
			out.Series[k] = v
		}
		return out.Series, h, m, nil
	}
	// Without a pool first: the pooled daemon's sandboxes then do not
	// share the machine with it.
	none, _, _, err := run(false, sz.E2BSerial, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("no pool: %w", err)
	}
	pooled, hits, misses, err := run(true, sz.E2BSerial, sz.E2BBurst, sz.E2BConcurrent)
	if err != nil {
		return nil, fmt.Errorf("default pool: %w", err)
	}
	if env.E2BSamples != "" {
		b, err := json.Marshal(pooled)
		if err == nil {
			err = os.WriteFile(env.E2BSamples, b, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("--e2b-samples: %w", err)
		}
	}
	served := fmt.Sprintf("%d of %d creates of the run served by the warm pool", hits, hits+misses)
	fig := func(name string, ms []float64, note string) Figure {
		f := Latency(name, millis(ms))
		f.Note = note
		return f
	}
	// halves says where a series' time went: the p50 of the create and of
	// the echo.
	halves := func(s map[string][]float64, name, note string) string {
		c, e := Latency("", millis(s[name+":create"])), Latency("", millis(s[name+":echo"]))
		h := fmt.Sprintf("p50 of the create %.1f ms, of the echo %.1f ms", c.P50, e.P50)
		if note == "" {
			return h
		}
		return note + "; " + h
	}
	var out []Figure
	// Names carry the configured sizes, not the counts measured: a
	// repeated run lines rows up by name (the counts are each row's n).
	f := fig(fmt.Sprintf("E2B SDK: create + echo, %d in a row, default pool", sz.E2BSerial), pooled["serial"], halves(pooled, "serial", served))
	out = append(out, WithTarget(f, "p50 < 20 ms, p95 < 2x p50", f.P50 < 20 && f.P95 < 2*f.P50))
	np := fig(fmt.Sprintf("E2B SDK: create + echo, %d in a row, no pool", sz.E2BSerial), none["serial"],
		halves(none, "serial", "")) // the target: Report.noteAgainst
	np.against, np.againstX = coldCreateName, e2bNoPoolX
	out = append(out, np)
	if b := pooled["burst"]; len(b) > 0 {
		out = append(out, fig(fmt.Sprintf("E2B SDK: create + echo, a burst of %d back to back (kept), default pool", sz.E2BBurst), b, halves(pooled, "burst", "")))
	}
	if c := pooled["concurrent"]; len(c) > 0 {
		out = append(out, fig(fmt.Sprintf("E2B SDK: create + echo, %d at once (%d rounds), default pool", sz.E2BConcurrent, sz.E2BRounds), c, halves(pooled, "concurrent", "")))
	}
	return out, nil
}

// e2bNoPoolX bounds the E2B SDK's create + echo with no pool by the cold
// GetOrCreate of the same run.
const e2bNoPoolX = 1.3

func millis(ms []float64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, v := range ms {
		out[i] = time.Duration(v * float64(time.Millisecond))
	}
	return out
}
