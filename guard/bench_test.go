package guard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs fn b.N times and also reports MB per CPU-second, which
// stays honest when other processes share the cores (wall-clock MB/s
// drops with the load; CPU-seconds don't).
func measure(b *testing.B, size int, fn func()) {
	b.SetBytes(int64(size))
	b.ResetTimer()
	c0 := cpuTime()
	n := 0
	for b.Loop() {
		fn()
		n++
	}
	if cpu := (cpuTime() - c0).Seconds(); cpu > 0 {
		b.ReportMetric(float64(size)*float64(n)/cpu/1e6, "MB/cpu-s")
	}
}

// logCorpus generates about size bytes of mixed, realistic log text:
// access logs, JSON lines, tracebacks, package manager and git output,
// CSV rows, prose, and now and then a secret or a piece of PII.
func logCorpus(size int, seed uint64) (string, int) {
	r := rand.New(rand.NewPCG(seed, seed))
	var b strings.Builder
	hex := func(n int) string { return randFrom(r, "0123456789abcdef", n) }
	uuid := func() string { return hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-" + hex(12) }
	ts := func() string {
		return fmt.Sprintf("2024-%02d-%02dT%02d:%02d:%02d.%03dZ", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
	}
	words := strings.Fields("the a request handler cache user session connection retry timeout worker queue job completed failed started " +
		"processing records batch upstream downstream config loaded value from to with for in on is was will be data file path")
	prose := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = words[r.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	secrets := 0
	for b.Len() < size {
		switch k := r.IntN(100); {
		case k < 30:
			fmt.Fprintf(&b, "%s INFO  [http] %s /api/v1/users/%d?page=%d %d %d %.1fms ip=10.%d.%d.%d req_id=%s\n",
				ts(), []string{"GET", "POST", "PUT"}[r.IntN(3)], r.IntN(100000), r.IntN(20), []int{200, 201, 404, 500}[r.IntN(4)],
				r.IntN(50000), r.Float64()*100, r.IntN(256), r.IntN(256), 1+r.IntN(254), uuid())
		case k < 50:
			fmt.Fprintf(&b, `{"ts":"%s","level":"debug","msg":"%s","key":"user:%d:profile","duration_ms":%.3f,"trace_id":"%s","count":%d}`+"\n",
				ts(), prose(4), r.IntN(100000), r.Float64(), hex(32), r.IntN(1000))
		case k < 58:
			fmt.Fprintf(&b, "Traceback (most recent call last):\n  File \"/home/user/app/%s.py\", line %d, in %s\n    result = process(batch[%d:%d])\nValueError: %s\n",
				words[r.IntN(len(words))], r.IntN(900), words[r.IntN(len(words))], r.IntN(100), r.IntN(1000), prose(6))
		case k < 66:
			fmt.Fprintf(&b, "Collecting numpy==1.%d.%d\n  Downloading numpy-1.%d.%d-cp311-cp311-manylinux_2_17_x86_64.whl (18.2 MB)\nadded %d packages, audited %d packages in %ds\n",
				r.IntN(30), r.IntN(10), r.IntN(30), r.IntN(10), r.IntN(500), r.IntN(900), r.IntN(60))
		case k < 72:
			fmt.Fprintf(&b, "commit %s\nDate:   Mon Jan %d %02d:%02d:%02d 2024 +0000\n\n    %s\n", hex(40), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), prose(7))
		case k < 76:
			fmt.Fprintf(&b, "pulling layer sha256:%s %d/%d bytes, image %s:v1.%d.%d.%d\n", hex(64), r.IntN(1<<20), 1<<20, words[r.IntN(len(words))], r.IntN(9), r.IntN(9), r.IntN(99))
		case k < 86:
			fmt.Fprintf(&b, "2024-%02d-%02d,%s,%d.%02d,EUR,%d,%s\n", 1+r.IntN(12), 1+r.IntN(28), words[r.IntN(len(words))], r.IntN(100000), r.IntN(100), r.IntN(10000), []string{"ok", "late", "void"}[r.IntN(3)])
		case k < 98:
			fmt.Fprintf(&b, "%s %s. Worker %d finished %d of %d items (%.1f%%) at %d.%03d s\n", ts(), prose(10+r.IntN(10)), r.IntN(64), r.IntN(1000), 1000, r.Float64()*100, r.IntN(1000), r.IntN(1000))
		default:
			secrets++
			switch r.IntN(8) {
			case 0:
				fmt.Fprintf(&b, "Author: Dev %d <dev%d@exemplar.ie>\n", r.IntN(100), r.IntN(100))
			case 1:
				fmt.Fprintf(&b, "export OPENAI_API_KEY=%s\n", fakeOpenAI(r))
			case 2:
				fmt.Fprintf(&b, "connecting to postgres://app:%s@db.internal:5432/app\n", randKey(r, 16))
			case 3:
				fmt.Fprintf(&b, "payment card %s accepted\n", group4(fakeCard(r, "4", 16), " "))
			case 4:
				fmt.Fprintf(&b, "GITHUB_TOKEN=%s\n", fakeGitHubToken(r, "ghp_"))
			case 5:
				fmt.Fprintf(&b, "call me on +353 87 %03d %04d\n", 100+r.IntN(900), r.IntN(10000))
			case 6:
				fmt.Fprintf(&b, "aws_access_key_id=%s\n", fakeAWSKeyID(r))
			case 7:
				fmt.Fprintf(&b, "iban %s\n", spaced(fakeIBAN("IE", "AIBK"+randFrom(r, "0123456789", 14))))
			}
		}
	}
	return b.String(), secrets
}

// TestCorpus checks recall and precision on the benchmark corpus: every
// injected secret is found, and nothing else is.
func TestCorpus(t *testing.T) {
	text, secrets := logCorpus(1<<20, 1)
	g := newTestGuard(t, Config{})
	fs := g.Scan(text)
	if len(fs) < secrets {
		t.Errorf("%d findings for %d injected secrets", len(fs), secrets)
	}
	// other than the injected lines, only the 10.x addresses of access logs
	extra := 0
	for _, f := range fs {
		if f.Type != TypeIPAddress {
			continue
		}
		extra++
	}
	if n := len(fs) - extra; n != secrets {
		for _, f := range fs {
			if f.Type != TypeIPAddress {
				line := text[strings.LastIndexByte(text[:f.Start], '\n')+1 : f.End]
				if strings.Count(line, "=") < 2 || f.Type == TypeAPIKey {
					t.Logf("%s: %q", f.Type, line[max(0, len(line)-100):])
				}
			}
		}
		t.Errorf("%d non-IP findings, want %d injected", n, secrets)
		counts := map[string]int{}
		for _, f := range fs {
			counts[f.Type]++
		}
		t.Logf("by type: %v", counts)
	}
}

func benchCorpus(b *testing.B) string {
	b.Helper()
	text, _ := logCorpus(10<<20, 42)
	return text
}

func BenchmarkScan(b *testing.B) {
	text := benchCorpus(b)
	g := newTestGuard(b, Config{})
	measure(b, len(text), func() { g.Scan(text) })
}

func BenchmarkText(b *testing.B) {
	text := benchCorpus(b)
	g := newTestGuard(b, Config{})
	ctx := context.Background()
	measure(b, len(text), func() { g.Text(ctx, "t", text) })
}

func BenchmarkStream4K(b *testing.B) {
	text := benchCorpus(b)
	g := newTestGuard(b, Config{})
	ctx := context.Background()
	measure(b, len(text), func() {
		st := g.Stream(ctx, "t")
		for i := 0; i < len(text); i += 4096 {
			st.Write(text[i:min(len(text), i+4096)])
		}
		st.Flush()
	})
}

// fileMiB feeds data to a File redactor in 1 MiB writes, as ReadFile does.
func fileMiB(g *Guard, ctx context.Context, data []byte) {
	fr := g.File(ctx, "t")
	for i := 0; i < len(data); i += 1 << 20 {
		fr.Write(data[i:min(len(data), i+1<<20)])
	}
	fr.Flush()
}

// BenchmarkFileText: the log corpus read as a file.
func BenchmarkFileText(b *testing.B) {
	data := []byte(benchCorpus(b))
	g := newTestGuard(b, Config{})
	ctx := context.Background()
	measure(b, len(data), func() { fileMiB(g, ctx, data) })
}

// BenchmarkFileBinary: 10 MB of compressed-looking bytes in a ZIP, with the
// log corpus's text stored in it every 64 KiB, scanned in place.
func BenchmarkFileBinary(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	text := benchCorpus(b)
	data := make([]byte, 10<<20)
	for i := range data {
		data[i] = byte(r.UintN(256))
	}
	copy(data, "PK\x03\x04")
	for i := 4096; i+4096 < len(data); i += 64 << 10 {
		copy(data[i:], text[i:i+4096])
	}
	g := newTestGuard(b, Config{})
	ctx := context.Background()
	measure(b, len(data), func() { fileMiB(g, ctx, data) })
}
