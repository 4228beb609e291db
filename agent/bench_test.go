package agent_test

import (
	"bufio"
	"context"
	"io"
	"os/exec"
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
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.trip(b)
	}
}

// BenchmarkKernelRoundTrip measures a warm kernel.run through the Client
// over the agent's unix socket. Each iteration also does one floor round
// trip (timed apart), so the ratio x-floor compares the two under the same
// machine load; ns/op counts both, kernel-ns/op only the kernel call.
func BenchmarkKernelRoundTrip(b *testing.B) {
	c, _ := agenttest.StartClient(b)
	floor := startFloor(b)
	cases := []struct{ lang, code, want string }{
		{agent.Python, "1+1", "2"},
		{agent.JavaScript, "1+1", "2"},
		{agent.Bash, "echo 2", ""},
	}
	for _, tc := range cases {
		b.Run(tc.lang, func(b *testing.B) {
			ctx := context.Background()
			p := agent.RunCodeParams{Language: tc.lang, Code: tc.code}
			for i := 0; i < 50; i++ { // start and warm the kernel
				if _, err := c.RunCode(ctx, p, nil); err != nil {
					b.Fatal(err)
				}
			}
			var kernelT, floorT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				floor.trip(b)
				t1 := time.Now()
				r, err := c.RunCode(ctx, p, nil)
				kernelT += time.Since(t1)
				floorT += t1.Sub(t0)
				if err != nil {
					b.Fatal(err)
				}
				if !r.Success || (tc.want != "" && (len(r.Results) != 1 || r.Results[0].Text != tc.want)) {
					b.Fatalf("bad result %+v", r)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(kernelT.Nanoseconds())/float64(b.N), "kernel-ns/op")
			b.ReportMetric(float64(floorT.Nanoseconds())/float64(b.N), "floor-ns/op")
			b.ReportMetric(float64(kernelT)/float64(floorT), "x-floor")
		})
	}
}

// BenchmarkPing is the protocol's own round trip (no kernel).
func BenchmarkPing(b *testing.B) {
	c, _ := agenttest.StartClient(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
