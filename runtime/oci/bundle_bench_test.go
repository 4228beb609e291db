package oci

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/runtime"
)

// BenchmarkBundle measures the daemon's own work on a bundle before the
// runtime binary runs: the spec built, its identity files and config.json,
// runtime and secret written (what a cold create costs the host's CPU
// beside the runtime).
func BenchmarkBundle(b *testing.B) {
	for _, kind := range []string{KindCrun, KindRunc} {
		b.Run(kind, func(b *testing.B) {
			r := newRuntime(b, kind)
			spec := runtime.Spec{ID: runtime.NewID(), Args: []string{AgentPath, "--key-fd", "3"}, Env: map[string]string{"A": "1"},
				Mounts: []runtime.Mount{{Source: "/bin/true", Destination: AgentPath, ReadOnly: true}},
				Labels: map[string]string{"template": "default"}, Secret: make([]byte, 32)}
			ids := IDRange{Base: 1 << 20, Size: 65536}
			dir := b.TempDir()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				sp, err := buildSpec(spec, r.rootfs, r.kind, r.seccompBPF, ids, "")
				if err != nil {
					b.Fatal(err)
				}
				files, err := r.identity(sp)
				if err != nil {
					b.Fatal(err)
				}
				buf, err := json.Marshal(sp)
				if err != nil {
					b.Fatal(err)
				}
				for name, data := range map[string][]byte{"config.json": buf, "runtime": []byte(kind + "\n"), "secret": spec.Secret} {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				for _, f := range files {
					os.Remove(f)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(len(mustMarshal(b, spec, r, ids))), "config-bytes")
		})
	}
}

func mustMarshal(b *testing.B, spec runtime.Spec, r *Runtime, ids IDRange) []byte {
	sp, err := buildSpec(spec, r.rootfs, r.kind, r.seccompBPF, ids, "")
	if err != nil {
		b.Fatal(err)
	}
	buf, err := json.Marshal(sp)
	if err != nil {
		b.Fatal(err)
	}
	return buf
}
