package server_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
)

// BenchmarkStreamLatency (002 §3.1.4, §8.2: streaming latency under
// 100 ms) measures the delay from a write in the sandbox to its event at
// the caller, through `sandlot serve`'s NDJSON stream of run_code: the
// cell writes the clock (time.time_ns, the host's clock: a sandbox shares
// it) to stdout and stderr five times, 50 ms apart, and the caller takes
// the difference when each event arrives. The guard redacts the stream on
// the way (its held-back tail is part of the delay). It reports p50, p95
// and the largest delay in milliseconds.
func BenchmarkStreamLatency(b *testing.B) {
	runtimePreconditions(b)
	d := startDaemon(b, b.TempDir())
	defer d.stop(b)
	defer d.cleanup(b, d.key)
	c := d.client(d.key)
	ctx := context.Background()
	target := client.Target{ConversationID: "stream-latency"}
	const code = "import sys, time\n" +
		"for i in range(5):\n" +
		"    print(time.time_ns(), flush=True)\n" +
		"    print(time.time_ns(), file=sys.stderr, flush=True)\n" +
		"    time.sleep(0.05)\n"
	// The first call creates the context and starts the kernel.
	if _, err := c.RunCode(ctx, client.RunCodeRequest{Target: target, Language: "python", Code: "1"}); err != nil {
		b.Fatal(err)
	}
	var delays []time.Duration
	b.ResetTimer()
	for range b.N {
		_, err := c.RunCodeStream(ctx, client.RunCodeRequest{Target: target, Language: "python", Code: code}, func(ev api.Event) error {
			at := time.Now()
			if ev.Type != "stdout" && ev.Type != "stderr" {
				return nil
			}
			for _, f := range strings.Fields(ev.Data) {
				ns, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					b.Fatalf("%s event %q: %v", ev.Type, ev.Data, err)
				}
				delays = append(delays, at.Sub(time.Unix(0, ns)))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if len(delays) != 10*b.N {
		b.Fatalf("%d timestamps streamed, want %d", len(delays), 10*b.N)
	}
	slices.Sort(delays)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(delays[len(delays)/2]), "p50-ms")
	b.ReportMetric(ms(delays[len(delays)*95/100]), "p95-ms")
	b.ReportMetric(ms(delays[len(delays)-1]), "max-ms")
}
