package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/bench"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestKubernetesGroup runs sandlot bench's kubernetes group with small counts on the
// test cluster (gVisor, the default template's pod image): every figure
// is measured, none is an error note.
func TestKubernetesGroup(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	store, img := debiantest.Default(t)
	agentBin, err := os.ReadFile(testenv.PodAgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	base, err := store.V1(ctx, img.Digest)
	if err != nil {
		t.Fatal(err)
	}
	pi, err := podimage.Build(ctx, base, agentBin)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := podimage.Push(ctx, pi, c.Registry+"/sandlot/templates/default:bench", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The provider's debug line "sandbox ready" says where each create's
	// time went; the test logs the medians.
	var phases phaseLog
	env := bench.KubeEnv{Client: c.Dynamic(), Namespace: c.Namespace(t, "bench"), Image: pinned.String(),
		RuntimeClass: "gvisor", Pool: 1, MemoryOf: bench.PodMemory,
		Logger: slog.New(slog.NewJSONHandler(&phases, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	r := bench.Runner{Cases: bench.KubeCases(env, bench.KubeSizes{Warm: 10, Cold: 1, Idle: 2, Creates: 3})}
	defer func() { t.Logf("where a create's time went (median ms): %s", phases.medians()) }()
	rep, err := r.Run(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kubernetes: claim from the warm pool to first result: python 1+1 (GetOrCreate + Execute)",
		"kubernetes: claim from the warm pool: GetOrCreate (pod enrolled, agent connected)",
		"kubernetes: floor: agent-sandbox's own claim on the warm pool to Ready (no sandlot)",
		"kubernetes: cold pod to first result: python 1+1 (a Sandbox of its own)",
		"kubernetes: cold pod: GetOrCreate (scheduled, started, enrolled, connected)",
		"kubernetes: idle sandboxes per node, by the pods' requests (what the scheduler admits)",
		"kubernetes: memory per idle sandbox pod, python kernel up (pod cgroup working set, mean of 2)",
		"kubernetes: idle sandboxes per node, by memory held (node allocatable / the mean above)",
		"kubernetes: create through two replicas, 2 at once on each (latency)",
	}
	got := map[string]bench.Figure{}
	for _, f := range rep.Figures[1:] { // after the floor
		got[f.Name] = f
		if f.Group != "kubernetes" || strings.HasPrefix(f.Note, "not measured") {
			t.Errorf("%s (%s): %s", f.Name, f.Group, f.Note)
		}
	}
	for _, name := range want {
		f, ok := got[name]
		switch {
		case !ok:
			t.Errorf("no figure %q", name)
		case f.P50 <= 0 && f.Value <= 0:
			t.Errorf("%s: nothing measured: %+v", name, f)
		}
	}
	if f := got[want[0]]; f.Met == nil || !strings.Contains(f.Note, "served by a claim on the pool") {
		t.Errorf("warm claim figure without its goal or note: %+v", f)
	}
	if f := got[want[8]]; f.Unit != "creates/s" || f.N != 3 {
		t.Errorf("replicas figure: %+v", f)
	}
	if t.Failed() {
		t.Logf("the node's load now: %s", c.NodeLoad(ctx))
	}
	for _, f := range rep.Figures {
		t.Logf("%s: n=%d p50=%.1f p95=%.1f value=%.1f %s %s", f.Name, f.N, f.P50, f.P95, f.Value, f.Unit, f.Note)
	}
}

// phaseLog collects the provider's "sandbox ready" lines (JSON).
type phaseLog struct {
	mu    sync.Mutex
	lines bytes.Buffer
}

func (l *phaseLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Contains(b, []byte(`"sandbox ready"`)) {
		l.lines.Write(b)
	}
	return len(b), nil
}

// medians are each phase's median over the warm and the cold creates.
func (l *phaseLog) medians() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := []string{"objects_ms", "ready_ms", "bound_ms", "enroll_ms", "connect_ms", "record_ms"}
	by := map[bool]map[string][]float64{true: {}, false: {}}
	for _, line := range bytes.Split(l.lines.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		warm, _ := m["warm"].(bool)
		for _, k := range keys {
			if v, ok := m[k].(float64); ok {
				by[warm][k] = append(by[warm][k], v)
			}
		}
	}
	var b strings.Builder
	for _, warm := range []bool{true, false} {
		fmt.Fprintf(&b, " warm=%v:", warm)
		for _, k := range keys {
			if v := by[warm][k]; len(v) > 0 {
				slices.Sort(v)
				fmt.Fprintf(&b, " %s %.0f (n=%d)", k, v[len(v)/2], len(v))
			}
		}
	}
	return b.String()
}
