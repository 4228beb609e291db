package agent_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
)

// floorScript is the raw floor: a python REPL over a pipe, one eval per line.
const floorScript = `import sys
w = sys.stdout.write
f = sys.stdout.flush
for line in sys.stdin:
    w(repr(eval(line)) + "\n")
    f()
`

// floorREPL is a host python REPL over a pipe: the raw floor.
type floorREPL struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startFloor(tb testing.TB) *floorREPL {
	tb.Helper()
	cmd := exec.Command("/usr/bin/python3", "-u", "-c", floorScript)
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	f := &floorREPL{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	tb.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	for i := 0; i < 200; i++ { // warm up
		f.trip(tb)
	}
	return f
}

// trip sends "1+1" and reads "2".
func (f *floorREPL) trip(tb testing.TB) {
	if _, err := io.WriteString(f.in, "1+1\n"); err != nil {
		tb.Fatal(err)
	}
	if line, err := f.out.ReadString('\n'); err != nil || line != "2\n" {
		tb.Fatalf("floor got %q %v", line, err)
	}
}

// BenchmarkFloorPythonPipe is the floor on its own line of the report.
func BenchmarkFloorPythonPipe(b *testing.B) {
	f := startFloor(b)
	sw0 := ctxSwitches(os.Getpid())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.trip(b)
	}
	b.StopTimer()
	b.ReportMetric(float64(ctxSwitches(os.Getpid())-sw0)/float64(b.N), "host-sw/op")
}

// hot times n back-to-back floor round trips (ns per trip).
func (f *floorREPL) hot(tb testing.TB, n int) float64 {
	start := time.Now()
	for i := 0; i < n; i++ {
		f.trip(tb)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

var roundTripCases = []struct{ lang, code, want string }{
	{agent.Python, "1+1", "2"},
	{agent.JavaScript, "1+1", "2"},
	{agent.Bash, "echo 2", ""},
}

func warm(b *testing.B, c *agent.Client, p agent.RunCodeParams) {
	for i := 0; i < 50; i++ { // start and warm the kernel
		if _, err := c.RunCode(context.Background(), p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func check(b *testing.B, r *agent.RunCodeResult, err error, want string) {
	if err != nil {
		b.Fatal(err)
	}
	if !r.Success || (want != "" && (len(r.Results) != 1 || r.Results[0].Text != want)) {
		b.Fatalf("bad result %+v", r)
	}
}

// BenchmarkKernelRoundTrip measures a warm kernel.run through the Client
// over the agent's unix socket, back to back. x-floor divides it by the
// floor (a host python REPL over a pipe, also back to back) measured in the
// same run, just before.
func BenchmarkKernelRoundTrip(b *testing.B) {
	c, _ := agenttest.StartClient(b)
	floor := startFloor(b)
	for _, tc := range roundTripCases {
		b.Run(tc.lang, func(b *testing.B) {
			ctx := context.Background()
			p := agent.RunCodeParams{Language: tc.lang, Code: tc.code}
			warm(b, c, p)
			floorNs := floor.hot(b, 5000)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := c.RunCode(ctx, p, nil)
				check(b, r, err, tc.want)
			}
			b.StopTimer()
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(floorNs, "floor-ns/op")
			b.ReportMetric(perOp/floorNs, "x-floor")
		})
	}
}

// BenchmarkKernelRoundTripInterleaved alternates one floor trip and one
// kernel call per iteration (timed apart), so both see the same machine
// load at the same moment; on a shared, noisy machine this ratio is the
// steadier one. ns/op counts both; kernel-ns/op only the kernel call.
func BenchmarkKernelRoundTripInterleaved(b *testing.B) {
	c, a := agenttest.StartClient(b)
	floor := startFloor(b)
	for _, tc := range roundTripCases {
		b.Run(tc.lang, func(b *testing.B) {
			ctx := context.Background()
			p := agent.RunCodeParams{Language: tc.lang, Code: tc.code}
			warm(b, c, p)
			var kernelT, floorT time.Duration
			agentCPU0, selfCPU0 := cpuNs(a.Cmd.Process.Pid), cpuNs(os.Getpid())
			kpid := childPid(a.Cmd.Process.Pid)
			sw0 := [3]int64{ctxSwitches(os.Getpid()), ctxSwitches(a.Cmd.Process.Pid), ctxSwitches(kpid)}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				floor.trip(b)
				t1 := time.Now()
				r, err := c.RunCode(ctx, p, nil)
				kernelT += time.Since(t1)
				floorT += t1.Sub(t0)
				check(b, r, err, tc.want)
			}
			b.StopTimer()
			b.ReportMetric(float64(kernelT.Nanoseconds())/float64(b.N), "kernel-ns/op")
			b.ReportMetric(float64(floorT.Nanoseconds())/float64(b.N), "floor-ns/op")
			b.ReportMetric(float64(kernelT)/float64(floorT), "x-floor")
			// CPU time (all threads) per iteration: steadier than wall time on
			// a loaded machine. The host side includes the floor's client.
			b.ReportMetric(float64(cpuNs(a.Cmd.Process.Pid)-agentCPU0)/float64(b.N)/1e3, "agent-cpu-us/op")
			b.ReportMetric(float64(cpuNs(os.Getpid())-selfCPU0)/float64(b.N)/1e3, "host-cpu-us/op")
			b.ReportMetric(float64(ctxSwitches(os.Getpid())-sw0[0])/float64(b.N), "host-sw/op")
			b.ReportMetric(float64(ctxSwitches(a.Cmd.Process.Pid)-sw0[1])/float64(b.N), "agent-sw/op")
			b.ReportMetric(float64(ctxSwitches(kpid)-sw0[2])/float64(b.N), "kernel-sw/op")
		})
	}
}

// BenchmarkPing is the protocol's own round trip (no kernel), with the
// agent's CPU per ping (steadier than the wall time on a loaded machine).
func BenchmarkPing(b *testing.B) {
	c, a := agenttest.StartClient(b)
	ctx := context.Background()
	cpu0 := cpuNs(a.Cmd.Process.Pid)
	sw0 := [2]int64{ctxSwitches(os.Getpid()), ctxSwitches(a.Cmd.Process.Pid)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(ctxSwitches(os.Getpid())-sw0[0])/float64(b.N), "host-sw/op")
	b.ReportMetric(float64(ctxSwitches(a.Cmd.Process.Pid)-sw0[1])/float64(b.N), "agent-sw/op")
	b.ReportMetric(float64(cpuNs(a.Cmd.Process.Pid)-cpu0)/float64(b.N)/1e3, "agent-cpu-us/op")
}

// cpuNs is the CPU time so far of every thread of process pid, from
// /proc/<pid>/task/*/schedstat (ns on CPU is the first field).
func cpuNs(pid int) int64 {
	return sumTasks(pid, "schedstat", func(b []byte) int64 {
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n
		}
		return 0
	})
}

// sumTasks adds up what field reads from /proc/<pid>/task/*/<file>, the
// file of each thread of process pid.
func sumTasks(pid int, file string, field func([]byte) int64) int64 {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", file))
	var total int64
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil {
			total += field(b)
		}
	}
	return total
}

// BenchmarkKernelRoundTripProbed alternates a warm python call with the
// reuse's health check riding on it (WithProbe: a ping in the same write,
// answered before the request is dispatched) and the same call without,
// so both see the same load: probe-ns/op less plain-ns/op is what the
// in-band health check costs the caller.
func BenchmarkKernelRoundTripProbed(b *testing.B) {
	c, _ := agenttest.StartClient(b)
	p := agent.RunCodeParams{Language: agent.Python, Code: "1+1"}
	warm(b, c, p)
	plain, probed := context.Background(), agent.WithProbe(context.Background())
	var plainT, probedT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := c.RunCode(probed, p, nil)
		probedT += time.Since(t0)
		check(b, r, err, "2")
		t1 := time.Now()
		r, err = c.RunCode(plain, p, nil)
		plainT += time.Since(t1)
		check(b, r, err, "2")
	}
	b.StopTimer()
	b.ReportMetric(float64(probedT.Nanoseconds())/float64(b.N), "probe-ns/op")
	b.ReportMetric(float64(plainT.Nanoseconds())/float64(b.N), "plain-ns/op")
}

// ctxSwitches is the context switches so far of every thread of pid.
func ctxSwitches(pid int) int64 {
	return sumTasks(pid, "status", func(b []byte) int64 {
		var n int64
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
		return n
	})
}

// childPid is pid's newest child (the kernel the agent started last).
func childPid(pid int) int {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	last := 0
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if n, _ := strconv.Atoi(f); n > last {
				last = n
			}
		}
	}
	return last
}
