package oci

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/runtime"
)

// benchCode is a python process with about what a kernel holds (modules
// imported, 8 MiB of data) that counts every millisecond.
const benchCode = `import os, time, json, decimal, fractions, collections, re
data = bytearray(os.urandom(8 << 20))
n = 0
while True:
    n += 1
    open('/run/sandlot/n.tmp', 'w').write(str(n))
    os.rename('/run/sandlot/n.tmp', '/run/sandlot/n')
    time.sleep(0.001)
`

// BenchmarkRestoreOptions compares runsc's checkpoint and restore options
// on a sandbox of an image (1 MiB in its writable layer, a python process
// of about a kernel's memory), the variants alternated iteration by
// iteration so each sees the same load: the checkpoint, the restore (the
// layer put back and `runsc restore`) and the restore to the process's
// first sign of life, p50 of each, and the image's size on disk.
func BenchmarkRestoreOptions(b *testing.B) {
	r := newRuntime(b, KindRunsc)
	a, _ := imageLayers(b)
	variants := []struct {
		name        string
		ckpt, rstor []string
	}{
		{"default", nil, nil},
		{"background", nil, []string{"--background"}},
		{"direct", []string{"--direct"}, []string{"--direct"}},
		{"exclude-zero", []string{"--exclude-committed-zero-pages"}, nil},
		{"background-exclude-zero", []string{"--exclude-committed-zero-pages"}, []string{"--background"}},
		{"flate", []string{"--compression=flate-best-speed"}, nil},
	}
	type times struct{ ckpt, rstor, alive []time.Duration }
	got := make([]times, len(variants))
	size := make([]int64, len(variants))
	ctx := context.Background()
	defer func() { checkpointFlags, restoreFlags = nil, nil }()
	for range b.N {
		for i, v := range variants {
			id := runtime.NewID()
			sp := counterSpec(id)
			sp.Args = []string{"/usr/bin/python3", "-c", "open('/home/user/blob', 'wb').write(b'b' * (1 << 20))\n" + benchCode}
			sp.Root = &runtime.Root{Layers: a}
			if err := r.Create(ctx, sp); err != nil {
				b.Fatal(err)
			}
			waitCount(b, r, id, 50, -1)
			checkpointFlags, restoreFlags = v.ckpt, v.rstor
			t0 := time.Now()
			if err := r.Checkpoint(ctx, id, ""); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			size[i] = dirSize(r.checkpointDir(id))
			saved := readCount(r, id)
			t2 := time.Now()
			if err := r.Restore(ctx, id, ""); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			for deadline := t3.Add(time.Minute); readCount(r, id) == saved; {
				if time.Now().After(deadline) {
					b.Fatal("the restored process does not count")
				}
				time.Sleep(200 * time.Microsecond)
			}
			t4 := time.Now()
			got[i].ckpt, got[i].rstor, got[i].alive = append(got[i].ckpt, t1.Sub(t0)), append(got[i].rstor, t3.Sub(t2)), append(got[i].alive, t4.Sub(t2))
			if err := r.Delete(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i, v := range variants {
		b.ReportMetric(p50ms(got[i].ckpt), v.name+"-checkpoint-ms")
		b.ReportMetric(p50ms(got[i].rstor), v.name+"-restore-ms")
		b.ReportMetric(p50ms(got[i].alive), v.name+"-alive-ms")
		b.ReportMetric(float64(size[i])/(1<<20), v.name+"-image-MiB")
	}
}

func p50ms(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// readCount is the count a counter last wrote (-1: none yet).
func readCount(r *Runtime, id string) int {
	b, err := os.ReadFile(filepath.Join(r.chanDir(id), "n"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}
