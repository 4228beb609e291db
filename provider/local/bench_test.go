package local

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkColdCreate measures create → agent ready → first python `1+1`
// result on a fresh sandbox. Destroy is not timed. Reported: p50 of the
// whole, p50 of create-to-ready, and, interleaved with the iterations so
// that both see the same machine load, the floor: a host python started
// cold to `print(1+1)`, and the ratio of the two p50s.
func BenchmarkColdCreate(b *testing.B) {
	py := testenv.RequireBinary(b, "/usr/bin/python3")
	for _, tc := range []struct {
		name, kind string
		prestart   []string
	}{{"crun", "crun", nil}, {"runc", "runc", nil}, {"runsc", "runsc", nil}, {"crun-prestart", "crun", []string{"python"}}} {
		b.Run(tc.name, func(b *testing.B) {
			p := newProvider(b, tc.kind, contexts.Limits{}, tc.prestart...)
			ctx := context.Background()
			var total, ready, floor []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				fs := time.Now()
				if out, err := exec.Command(py, "-c", "print(1+1)").Output(); err != nil || string(out) != "2\n" {
					b.Fatalf("host python: %q %v", out, err)
				}
				floor = append(floor, time.Since(fs))
				b.StartTimer()
				start := time.Now()
				sb, err := p.Create(ctx, contexts.Spec{})
				if err != nil {
					b.Fatal(err)
				}
				ready = append(ready, time.Since(start))
				r, err := sb.RunCode(ctx, agentRun("python", "1+1"), nil)
				if err != nil || mainText(r) != "2" {
					b.Fatalf("1+1 = %+v, %v", r, err)
				}
				total = append(total, time.Since(start))
				b.StopTimer()
				sb.Close()
				if err := p.Destroy(ctx, sb.ID()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(ms(p50(total)), "p50-ms")
			b.ReportMetric(ms(p50(ready)), "ready-p50-ms")
			b.ReportMetric(ms(p50(floor)), "floor-p50-ms")
			b.ReportMetric(float64(p50(total))/float64(p50(floor)), "x-floor")
		})
	}
}

// BenchmarkFloorHostPython is the floor for both benchmarks above and
// below, measured in the same run: a host python started cold to `1+1`
// (cold-ms), and a warm python REPL over a pipe answering `1+1` (ns/op).
func BenchmarkFloorHostPython(b *testing.B) {
	py := testenv.RequireBinary(b, "/usr/bin/python3") // the one sandboxes run, not a shim
	var cold []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		if out, err := exec.Command(py, "-c", "print(1+1)").Output(); err != nil || string(out) != "2\n" {
			b.Fatalf("python: %q %v", out, err)
		}
		cold = append(cold, time.Since(start))
	}
	cmd := exec.Command(py, "-u", "-c", "import sys\nfor l in sys.stdin:\n    print(eval(l), flush=True)")
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	rd := bufio.NewReader(outp)
	var warm []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		io.WriteString(in, "1+1\n")
		if l, err := rd.ReadString('\n'); err != nil || l != "2\n" {
			b.Fatalf("repl: %q %v", l, err)
		}
		warm = append(warm, time.Since(start))
	}
	b.ReportMetric(ms(p50(cold)), "cold-p50-ms")
	b.ReportMetric(float64(p50(warm).Nanoseconds())/1000, "warm-p50-us")
}

// BenchmarkIdleMemory reports the memory of one idle sandbox: its cgroup's
// usage (which includes page cache and tmpfs) and the PSS of its processes
// (smaps_rollup), with only the agent running and after the python kernel
// has started.
func BenchmarkIdleMemory(b *testing.B) {
	for _, kind := range []string{"crun", "runsc"} {
		b.Run(kind, func(b *testing.B) { benchIdleMemory(b, kind) })
	}
}

func benchIdleMemory(b *testing.B, kind string) {
	p := newProvider(b, kind, contexts.Limits{})
	ctx := context.Background()
	var cg0, pss0, cg1, pss1 float64
	for i := 0; i < b.N; i++ {
		c := create(b, p, contexts.Spec{})
		time.Sleep(100 * time.Millisecond)
		cg0, pss0 = sandboxMemory(b, p, c)
		if r := runCode(b, c, "python", "1+1"); mainText(r) != "2" {
			b.Fatalf("1+1 = %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
		cg1, pss1 = sandboxMemory(b, p, c)
		c.Close()
		p.Destroy(ctx, c.ID())
	}
	b.ReportMetric(cg0, "agent-cgroup-MiB")
	b.ReportMetric(pss0, "agent-pss-MiB")
	b.ReportMetric(cg1, "python-cgroup-MiB")
	b.ReportMetric(pss1, "python-pss-MiB")
}

// sandboxMemory returns (cgroup usage, summed PSS) in MiB.
func sandboxMemory(b *testing.B, p *Provider, c *agent.Client) (float64, float64) {
	b.Helper()
	st, err := p.Runtime().Stats(context.Background(), c.ID())
	if err != nil {
		b.Fatal(err)
	}
	procs, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory/sandlot", c.ID(), "cgroup.procs"))
	if err != nil {
		b.Fatal(err)
	}
	var pss int64
	for _, pid := range strings.Fields(string(procs)) {
		f, err := os.ReadFile(fmt.Sprintf("/proc/%s/smaps_rollup", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(f), "\n") {
			if rest, ok := strings.CutPrefix(l, "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				pss += kb << 10
			}
		}
	}
	return float64(st.MemoryBytes) / (1 << 20), float64(pss) / (1 << 20)
}

// BenchmarkWarmRunCode measures a warm python `1+1` round trip through the
// agent (kernel already running), per runtime.
func BenchmarkWarmRunCode(b *testing.B) {
	for _, kind := range []string{"crun", "runsc"} {
		b.Run(kind, func(b *testing.B) {
			p := newProvider(b, kind, contexts.Limits{})
			c := create(b, p, contexts.Spec{})
			if r := runCode(b, c, "python", "1+1"); mainText(r) != "2" {
				b.Fatalf("1+1 = %+v", r)
			}
			ctx := context.Background()
			var ds []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r, err := c.RunCode(ctx, agentRun("python", "1+1"), nil)
				if err != nil || mainText(r) != "2" {
					b.Fatalf("1+1 = %+v, %v", r, err)
				}
				ds = append(ds, time.Since(start))
			}
			b.ReportMetric(ms(p50(ds)), "p50-ms")
		})
	}
}

// BenchmarkColdCreateTemplate compares, iteration by iteration (so both
// see the same machine load), create → first python `1+1` result on the
// default template (the Debian base from the tests' image store: an
// overlay of id-mapped layers over a tmpfs upper) and on the host
// template (the host's /usr).
func BenchmarkColdCreateTemplate(b *testing.B) {
	s, _ := debiantest.Default(b)
	for _, kind := range []string{"crun", "runc"} {
		b.Run(kind, func(b *testing.B) {
			p := newImageProvider(b, kind, s, true)
			ctx := context.Background()
			times := map[string][]time.Duration{}
			once := func(template string) {
				start := time.Now()
				sb, err := p.Create(ctx, contexts.Spec{Template: template})
				if err != nil {
					b.Fatal(err)
				}
				r, err := sb.RunCode(ctx, agentRun("python", "1+1"), nil)
				if err != nil || mainText(r) != "2" {
					b.Fatalf("1+1 on %s = %+v, %v", template, r, err)
				}
				times[template] = append(times[template], time.Since(start))
				b.StopTimer()
				sb.Close()
				if err := p.Destroy(ctx, sb.ID()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			for i := 0; i < b.N; i++ {
				once(DefaultTemplate)
				once(HostTemplate)
			}
			image, host := p50(times[DefaultTemplate]), p50(times[HostTemplate])
			b.ReportMetric(ms(image), "image-p50-ms")
			b.ReportMetric(ms(host), "host-p50-ms")
			b.ReportMetric(float64(image)/float64(host), "x-host")
		})
	}
}
