package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/bench"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

func init() {
	commands = append(commands, newBenchCmd)
}

const benchSummary = "run the benchmark suite on the real runtime (--json; --markdown FILE regenerates BENCHMARKS.md from JSON on stdin)"

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: benchSummary, Args: cobra.NoArgs,
		Example: `  sandlot bench
  sandlot bench --cases 'warm|cold' --warm-n 200
  sandlot bench --repeat 3 --cases '^(cold create to first result|peer: crun)$'
  sandlot bench -o json > bench.json && sandlot bench --markdown BENCHMARKS.md < bench.json`}
	fs := cmd.Flags()
	sz := bench.DefaultSizes
	var (
		markdown      string
		rt            string
		memMiB        int64
		conc          string
		throughput    time.Duration
		cpuProfile    string
		logLevel      string
		httpStore     string
		storeKind     string
		imagesDir     string
		only          string
		suspendMemory bool
		e2bSDK        string
		e2bSamples    string
		e2bBudget     int64
		repeat        int
	)
	var o output
	o.register(cmd)
	var kf benchKubeFlags
	kf.register(fs)
	fs.Lookup("json").Usage = "print the JSON report to stdout instead of the table (the same as -o json; --markdown reads it)"
	fs.StringVar(&markdown, "markdown", "", "read a JSON report from stdin and write it as markdown to FILE (- for stdout), keeping FILE's \"## Notes\" section")
	fs.StringVar(&rt, "runtime", "auto", "OCI runtime: auto, crun, runc, runsc")
	fs.Int64Var(&memMiB, "sandbox-memory", 256, "memory limit per sandbox in MiB")
	fs.IntVar(&sz.Floor, "floor-n", sz.Floor, "floor samples")
	fs.IntVar(&sz.Warm, "warm-n", sz.Warm, "warm round trips per language through the Go API")
	fs.IntVar(&sz.HTTP, "http-n", sz.HTTP, "warm round trips over HTTP")
	fs.IntVar(&sz.Cold, "cold-n", sz.Cold, "cold creates")
	fs.IntVar(&sz.Pool, "pool-n", sz.Pool, "warm pool acquisitions")
	fs.DurationVar(&throughput, "throughput", sz.Throughput, "duration of each throughput level")
	fs.StringVar(&conc, "concurrency", "10,50", "throughput levels: concurrent contexts, comma-separated")
	fs.IntVar(&sz.GuardMB, "guard-mb", sz.GuardMB, "guard corpus size in MiB")
	fs.IntVar(&sz.Peer, "peer-n", sz.Peer, "Jupyter samples (bwrap runs a tenth)")
	fs.IntVar(&sz.Desktop, "desktop-n", sz.Desktop, "desktop creates per case, cold and from the pool (actions: five times that); 0 skips the desktop figures, which need the \"desktop\" image in --images-dir")
	fs.IntVar(&sz.E2BSerial, "e2b-n", sz.E2BSerial, "E2B SDK creates (Sandbox.create and echo) in a row, with the default warm pool and with none; 0 skips the E2B SDK figures, which need node and the SDK (--e2b-sdk)")
	fs.IntVar(&sz.E2BBurst, "e2b-burst", sz.E2BBurst, "E2B SDK creates in a burst, back to back, kept until its end (default pool)")
	fs.IntVar(&sz.E2BConcurrent, "e2b-concurrent", sz.E2BConcurrent, "E2B SDK creates at once, per round (default pool)")
	fs.IntVar(&sz.E2BRounds, "e2b-rounds", sz.E2BRounds, "rounds of --e2b-concurrent creates")
	fs.Int64Var(&e2bBudget, "e2b-pool-budget", 0, "memory budget in MiB of the pooled E2B daemon's warm pool growth (0: the manager's default; negative: the pool stays at its size)")
	fs.StringVar(&e2bSamples, "e2b-samples", "", "write the pooled E2B SDK run's samples to FILE (JSON: milliseconds by series, and NAME:at, each sample's start in Unix milliseconds; with --repeat, the last run's)")
	fs.StringVar(&e2bSDK, "e2b-sdk", "", "directory whose node_modules holds the E2B JavaScript SDK (default: e2e/e2b under the working directory or a parent, after `npm ci` there)")
	fs.StringVar(&storeKind, "store", "memory", "store of the managers and daemons the bench starts: memory, or sqlite (a fresh SQLite file each, serve's default store)")
	fs.StringVar(&httpStore, "http-store", "", "store of the HTTP daemon (memory:, sqlite:///path, postgres://...; default: --store's)")
	fs.StringVar(&imagesDir, "images-dir", filepath.Join(defaultDataDir(), "images"), "image store whose \"default\" image (the Debian base serve builds) the image-template figures run on; without it they are skipped")
	fs.BoolVar(&suspendMemory, "suspend-memory", true, "the image provider keeps memory on a suspend where its runtime can (runsc with the state dir on a disk; serve's --suspend-memory); false: files only. The suspend figures say which they measured")
	fs.IntVar(&repeat, "repeat", 1, "run the floor and the cases N times (odd), whole runs one after another, and report each case's rows from its median run by its main figure (the notes say which run; the main figure's note gives every run's)")
	fs.StringVar(&only, "cases", "", "run only the cases whose name matches this regular expression (the floor always runs)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof)")
	fs.StringVar(&logLevel, "log-level", "error", "log level of the providers' log on stderr (debug: each create's phases)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		if err := bench.CheckRepeat(repeat); err != nil {
			return usageErr("--repeat: %v", err)
		}
		if markdown != "" {
			return writeMarkdown(std, markdown)
		}
		sz.Throughput = throughput
		sz.Concurrency = nil
		for _, f := range strings.Split(conc, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				return usageErr("--concurrency %q", conc)
			}
			sz.Concurrency = append(sz.Concurrency, n)
		}

		dir, err := os.MkdirTemp("", "sandlot-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		stores, err := newBenchStores(storeKind, dir)
		if err != nil {
			return err
		}
		if httpStore == "" {
			httpStore = stores.url("http")
		}
		log := export.NewLogger(std.Err, logLevel)
		if rt == "auto" {
			rt = "" // local.Config's name of auto
		}
		limits := contexts.Limits{MemoryBytes: memMiB << 20}
		env := bench.Env{Limits: limits, Store: stores.open()}
		rtName := ""
		prov, perr := local.New(local.Config{Runtime: rt, StateDir: filepath.Join(dir, "api"), Limits: limits, Logger: log})
		if perr == nil {
			env.Provider, env.Usage = prov, prov
			rtName = prov.Runtime().Name()
			env.Runtime = rtName
		} else {
			fmt.Fprintf(std.Err, "bench: no local provider, sandbox figures are skipped: %v\n", perr)
		}
		if perr == nil {
			if err := benchImages(&env, imagesDir, rt, filepath.Join(dir, "image"), limits, suspendMemory, log); err != nil {
				fmt.Fprintf(std.Err, "bench: image-template figures skipped: %v\n", err)
			}
			if sz.Desktop > 0 {
				if err := benchDesktop(&env, imagesDir, rt, filepath.Join(dir, "desktop"), log); err != nil {
					fmt.Fprintf(std.Err, "bench: desktop figures skipped: %v\n", err)
				}
			}
		}
		if env.Guard, err = guard.New(guard.Config{}); err != nil {
			return err
		}
		if perr == nil {
			d, err := startDaemon(ctx, httpStore, daemon.Config{DataDir: filepath.Join(dir, "data"), Runtime: rt,
				StateDir: filepath.Join(dir, "http"), Limits: limits, MaxExecutions: -1,
				ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
			if err != nil {
				fmt.Fprintf(std.Err, "bench: no HTTP server, the HTTP figure is skipped: %v\n", err)
			} else {
				defer d.stop()
				env.HTTPURL, env.APIKey = d.url, d.key
			}
			env.E2BSDKDir, env.E2BSamples = e2bSDK, e2bSamples
			env.E2B = e2bServers(dir, rt, limits, e2bBudget<<20, stores)
		}

		if cpuProfile != "" {
			f, err := os.Create(cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		var re *regexp.Regexp
		if only != "" {
			if re, err = regexp.Compile(only); err != nil {
				return usageErr("--cases %q: %v", only, err)
			}
		}
		cases := bench.Cases(env, sz)
		if re == nil || slices.ContainsFunc(bench.KubeCaseNames(), re.MatchString) {
			kenv, kstop := benchKube(ctx, kf, imagesDir, log)
			defer kstop()
			cases = append(cases, bench.KubeCases(kenv, kf.sz)...)
		}
		if re != nil {
			cases = slices.DeleteFunc(cases, func(c bench.Case) bool { return !re.MatchString(c.Name) })
		}
		r := bench.Runner{Cases: cases, Logger: log, Progress: std.Err}
		rep, err := r.Repeat(ctx, sz.Floor, repeat)
		if rep == nil {
			return err
		}
		rep.Runtime, rep.Store = rtName, storeKind
		if cmd.Flags().Changed("http-store") { // its scheme only: a URL may hold a password
			scheme, _, _ := strings.Cut(httpStore, ":")
			rep.Store += ", the HTTP daemon's " + scheme
		}
		if o.structured() {
			if jerr := o.print(std.Out, rep); jerr != nil {
				return jerr
			}
		} else {
			rep.Table(std.Out)
		}
		return err
	}
	return cmd
}

// writeMarkdown renders the JSON report on stdin into path, keeping the
// hand-written "## Notes" section of the file it replaces.
func writeMarkdown(std IO, path string) error {
	rep, err := bench.ReadReport(std.In)
	if err != nil {
		return fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
	}
	var b bytes.Buffer
	rep.Markdown(&b)
	if path == "-" {
		_, err := std.Out.Write(b.Bytes())
		return err
	}
	if old, err := os.ReadFile(path); err == nil {
		if i := bytes.Index(old, []byte("\n## Notes")); i >= 0 {
			b.Write(old[i:])
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// localDaemon is the daemon serve runs (daemon.New) in-process on a
// loopback port, with a tenant of its own (the bench and tests use it).
type localDaemon struct {
	url, key     string
	metricsToken string
	d            *daemon.Daemon
	st           store.Backend
	stop         func()
}

// startDaemon builds the daemon over cfg and the store at storeURL
// ("": memory:), creates a tenant and serves on 127.0.0.1:0 until stop
// (idempotent), which terminates every context it served.
func startDaemon(ctx context.Context, storeURL string, cfg daemon.Config) (*localDaemon, error) {
	if storeURL == "" {
		storeURL = "memory:"
	}
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	t, key, err := createTenant(ctx, st, "bench", tenant.GuardEnforce, false, nil, 0)
	if err != nil {
		st.Close()
		return nil, err
	}
	d, err := daemon.New(ctx, cfg, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.Close(context.WithoutCancel(ctx))
		st.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- d.Serve(sctx, ln) }()
	ld := &localDaemon{url: "http://" + ln.Addr().String(), key: key, metricsToken: d.MetricsToken(), d: d, st: st}
	var stop func()
	var once sync.Once
	ld.stop = func() { once.Do(stop) }
	stop = func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		m := d.Manager()
		recs, _ := m.List(cctx, contexts.Filter{TenantID: t.ID, States: []contexts.State{contexts.StateCreating, contexts.StateReady}, Limit: 1000})
		for _, r := range recs {
			m.Terminate(cctx, t.ID, r.ID, contexts.ReasonDeleted)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			if cfg.Logger != nil {
				cfg.Logger.Warn("bench server", slog.String(logkey.Err, err.Error()))
			}
		}
		d.Close(cctx)
		st.Close()
	}
	return ld, nil
}

// e2bServers starts, for the E2B SDK figures, a daemon like the HTTP
// figure's, on a memory store and state of its own under dir: with the
// manager's default warm pool (budget: its growth's, 0 the default), or
// with none. Its tenant has no limit on
// contexts (a burst keeps a hundred).
func e2bServers(dir, rt string, limits contexts.Limits, budget int64, stores *benchStores) bench.E2BServers {
	n := 0
	return func(ctx context.Context, pool bool) (*bench.E2BServer, error) {
		n++
		sub := filepath.Join(dir, fmt.Sprintf("e2b%d", n))
		size := 0 // none
		if pool {
			size = -1 // the manager's default
		}
		d, err := startDaemon(ctx, stores.url("e2b"), daemon.Config{DataDir: filepath.Join(sub, "data"), Runtime: rt,
			StateDir: filepath.Join(sub, "state"), Limits: limits, MaxExecutions: -1, PoolSize: size, PoolMemoryBudget: budget,
			MaxPerTenant: -1, MaxPerConversation: -1,
			ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			return nil, err
		}
		m := d.d.Manager()
		if pool {
			// Start from full pools, as a daemon that has been up a while:
			// the default template's own (python started) and the one of
			// E2B's base sandbox (no kernel).
			// daemon.New lists the empty kernel set on the local
			// provider, so the default template has two pools of the
			// manager's default size, warmed at Start.
			if err := bench.WaitPool(ctx, m, 2*contexts.DefaultPoolSize, time.Minute); err != nil {
				d.stop()
				return nil, fmt.Errorf("the default template's two warm pools (/v1's and E2B's base sandbox's, %d each) did not fill: %w", contexts.DefaultPoolSize, err)
			}
		}
		return &bench.E2BServer{URL: d.url, Key: d.key, Stop: d.stop, PoolStats: func() (int64, int64) {
			st := m.Stats()
			return st.PoolHits, st.PoolMisses
		}}, nil
	}
}

// benchImages gives env a provider whose default template is the image
// store's "default" image, when the store at dir has one (serve builds it
// at first start; bench never builds it).
// benchDesktop gives env a provider of the desktop template over the
// image store at dir, when it holds the desktop image (serve builds it on
// first use).
func benchDesktop(env *bench.Env, dir, rt, stateDir string, log *slog.Logger) error {
	s, err := image.Open(dir, image.Config{Logger: log})
	if err != nil {
		return err
	}
	if _, err := s.Get(context.Background(), desktop.Template); err != nil {
		return fmt.Errorf("image store %s has no %q image (a desktop create in serve builds it): %w", dir, desktop.Template, err)
	}
	cat := templates.New(templates.Config{Store: memory.New(), Images: s, Desktop: desktop.Settings()})
	p, err := local.New(local.Config{Runtime: rt, StateDir: stateDir, Images: s, Templates: cat, Logger: log})
	if err != nil {
		return err
	}
	env.DesktopProvider, env.DesktopUsage, env.DesktopCatalog = p, p, cat
	return nil
}

func benchImages(env *bench.Env, dir, rt, stateDir string, limits contexts.Limits, keepMemory bool, log *slog.Logger) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no image store at %s (run sandlot serve once, or pass --images-dir)", dir)
	}
	s, err := image.Open(dir, image.Config{Logger: log})
	if err != nil {
		return err
	}
	if _, err := s.Get(context.Background(), local.DefaultTemplate); err != nil {
		return fmt.Errorf("image store %s has no %q image: %w", dir, local.DefaultTemplate, err)
	}
	// The catalog resolves "default" by the store's name, as the provider
	// did without one, and keeps the state cases' snapshots.
	st := memory.New()
	if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: bench.Tenant}, tenant.HashKey("e2b_bench")); err != nil {
		return err
	}
	cat := templates.New(templates.Config{Store: st, Images: s, Snapshots: st, Logger: log})
	lc := local.Config{Runtime: rt, StateDir: stateDir, Limits: limits, Images: s, Templates: cat, NoMemory: !keepMemory, Logger: log}
	vs, verr := benchVolumes(filepath.Join(stateDir, "volumes"), log)
	if verr == nil {
		lc.Volumes = vs
	} else {
		log.Warn("bench: volume figures skipped", logkey.Err, verr)
	}
	p, err := local.New(lc)
	if err != nil {
		return err
	}
	env.ImageProvider, env.ImageUsage, env.ImageStoreDir, env.ImageCatalog = p, p, dir, cat
	if verr == nil {
		env.Volumes = vs
	}
	return nil
}

// benchVolumes is a volumes service for the bench's tenant, its files in
// dir (removed with the bench's temp dir), its records in memory.
func benchVolumes(dir string, log *slog.Logger) (*volumes.Service, error) {
	h, err := volumes.NewHost(dir)
	if err != nil {
		return nil, err
	}
	st := memory.New()
	if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: bench.Tenant}, tenant.HashKey("e2b_bench-volumes")); err != nil {
		return nil, err
	}
	return volumes.NewService(st, h, volumes.Config{Logger: log}), nil
}
