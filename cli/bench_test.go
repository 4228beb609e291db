package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/bench"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// TestBenchCommand runs `sandlot bench --json` in a tiny configuration on
// the real runtime, then regenerates a markdown file from its JSON.
func TestBenchCommand(t *testing.T) {
	lrunNeedAgent(t)
	debiantest.Default(t) // the image-template figures run on the shared Debian base
	// No cluster: the kubernetes group is one line that says why
	// (bench's TestKubernetesGroup runs it on the test cluster).
	t.Setenv("KUBECONFIG", "")
	var out, errw bytes.Buffer
	// One desktop per desktop case (when the shared store holds the
	// desktop image): each is a whole XFCE and Chromium start, and the
	// default three of each made this test most of the package's time.
	err := Run(context.Background(), []string{"bench", "--json", "--floor-n", "50", "--warm-n", "20", "--http-n", "20",
		"--cold-n", "2", "--pool-n", "2", "--throughput", "300ms", "--concurrency", "2", "--guard-mb", "1", "--peer-n", "0",
		"--desktop-n", "1", "--images-dir", debiantest.StoreDir()},
		nil, &out, &errw)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errw.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bench --json output: %v\n%s", err, out.String())
	}
	if rep.FloorP50 <= 0 || rep.Runtime == "" {
		t.Errorf("floor %v, runtime %q", rep.FloorP50, rep.Runtime)
	}
	want := []string{"warm run_code python (1+1), Go API", "warm run_code javascript (1+1), Go API", "warm run_code bash (echo 2), Go API",
		"warm run_code python (1+1), HTTP loopback keep-alive", "cold create to first result: python 1+1, no pool",
		"cold first call: Execute python 1+1 on a new context, no pool (creates it; its kernel starts at boot)",
		"GetOrCreate from the warm pool", "throughput: python 1+1 on 2 contexts at once (latency)",
		"density: idle contexts per 2 GiB (by PSS, python kernel up)", "guard: redact mixed log text (1 MiB, best of 3)",
		"image template: cold create to first result: python 1+1, no pool", "image template: GetOrCreate from the warm pool",
		"image template: PSS per idle sandbox (python kernel up, mean of 5)",
		"cold create to first result: python 1+1, IPython, no pool (IPython imported on the first cell)",
		"per cell: warm run_code python (1+1), IPython, Go API"}
	got := map[string]bench.Figure{}
	for _, f := range rep.Figures {
		got[f.Name] = f
		if f.Group != "peer" && f.Group != "kubernetes" && strings.HasPrefix(f.Note, "not measured") {
			t.Errorf("%s: %s", f.Name, f.Note)
		}
	}
	if f := got["kubernetes"]; f.Group != "kubernetes" || !strings.Contains(f.Note, "not run: no cluster") {
		t.Errorf("the kubernetes group without a cluster: %+v", f)
	}
	for _, name := range want {
		f, ok := got[name]
		if !ok {
			t.Errorf("no figure %q", name)
			continue
		}
		if f.P50 <= 0 && f.Value <= 0 {
			t.Errorf("%s: nothing measured: %+v", name, f)
		}
		if f.P50 > 0 && f.Ratio <= 0 {
			t.Errorf("%s: no ratio to the floor", name)
		}
	}

	// --markdown keeps the notes of the file it regenerates.
	md := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	os.WriteFile(md, []byte("# old\n\n## Notes\n\nhand-written\n"), 0o644)
	if err := Run(context.Background(), []string{"bench", "--markdown", md}, bytes.NewReader(out.Bytes()), &out, &errw); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(md)
	if !strings.HasPrefix(string(b), "# Benchmarks") || !strings.Contains(string(b), "| warm | warm run_code python (1+1), Go API |") ||
		!strings.HasSuffix(string(b), "## Notes\n\nhand-written\n") || strings.Contains(string(b), "# old") {
		t.Errorf("markdown:\n%s", b)
	}
}
