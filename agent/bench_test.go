package agent_test

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"sync"
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

// pipeFloor measures the floor round trip (write "1+1", read "2") n times
// and returns ns per round trip.
func pipeFloor(tb testing.TB, n int) float64 {
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
	defer func() { in.Close(); _ = cmd.Wait() }()
	out := bufio.NewReader(outPipe)
	trip := func() {
		if _, err := io.WriteString(in, "1+1\n"); err != nil {
			tb.Fatal(err)
		}
		line, err := out.ReadString('\n')
		if err != nil || line != "2\n" {
			tb.Fatalf("floor got %q %v", line, err)
		}
	}
	for i := 0; i < 200; i++ { // warm up
		trip()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		trip()
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

var (
	floorOnce sync.Once
	floorNs   float64
)

// BenchmarkFloorPythonPipe is the floor on its own line of the report.
func BenchmarkFloorPythonPipe(b *testing.B) {
	cmd := exec.Command("/usr/bin/python3", "-u", "-c", floorScript)
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	out := bufio.NewReader(outPipe)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := io.WriteString(in, "1+1\n"); err != nil {
			b.Fatal(err)
		}
		if line, err := out.ReadString('\n'); err != nil || line != "2\n" {
			b.Fatalf("got %q %v", line, err)
		}
	}
}

// BenchmarkKernelRoundTrip measures a warm kernel.run through the Client
// over the agent's unix socket, and reports it against the pipe floor
// measured in the same run (x-floor).
func BenchmarkKernelRoundTrip(b *testing.B) {
	c, _ := agenttest.StartClient(b)
	floorOnce.Do(func() { floorNs = pipeFloor(b, 5000) })
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
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := c.RunCode(ctx, p, nil)
				if err != nil {
					b.Fatal(err)
				}
				if !r.Success || (tc.want != "" && (len(r.Results) != 1 || r.Results[0].Text != tc.want)) {
					b.Fatalf("bad result %+v", r)
				}
			}
			b.StopTimer()
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(floorNs, "floor-ns/op")
			b.ReportMetric(perOp/floorNs, "x-floor")
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
