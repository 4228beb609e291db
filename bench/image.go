package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// imageCases are the figures of sandboxes whose root is an image template
// (Env.ImageProvider), beside the host-root figures of the same run: cold
// create, the warm pool, and memory and disk per idle sandbox.
func imageCases(env Env, sz Sizes) []Case {
	img := env
	img.Provider, img.Usage = env.ImageProvider, env.ImageUsage
	return []Case{
		{Name: "image template: cold create to first result", Group: "image", Run: func(ctx context.Context) ([]Figure, error) {
			fs, err := cold(ctx, img, sz)
			return renamed("image template: ", fs), err
		}},
		{Name: "image template: GetOrCreate from the warm pool", Group: "image", Run: func(ctx context.Context) ([]Figure, error) {
			fs, err := pool(ctx, img, sz)
			return renamed("image template: ", fs), err
		}},
		{Name: "image template: memory and disk per idle sandbox", Group: "image", Run: func(ctx context.Context) ([]Figure, error) {
			return imageFootprint(ctx, img)
		}},
	}
}

// renamed prefixes figure names, so the image rows stand beside the host
// rows of the same case.
func renamed(prefix string, fs []Figure) []Figure {
	for i := range fs {
		fs[i].Name = prefix + fs[i].Name
	}
	return fs
}

// imageFootprint starts idle contexts on the image template (python kernel
// up after one 1+1) and reports, per sandbox, the PSS of its processes, its
// cgroup memory (page cache and the tmpfs writable layer included) and the
// bytes its writable layer holds.
func imageFootprint(ctx context.Context, env Env) ([]Figure, error) {
	const n = 5
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: -1})
	if err != nil {
		return nil, err
	}
	defer stop()
	var pss, cg, disk int64
	for i := 0; i < n; i++ {
		id := ident(fmt.Sprintf("image-idle-%d", i))
		res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
		if err != nil {
			return nil, err
		}
		if err := check(res, "2"); err != nil {
			return nil, err
		}
	}
	time.Sleep(500 * time.Millisecond) // let the calls settle
	for i := 0; i < n; i++ {
		rec, err := m.Lookup(ctx, ident(fmt.Sprintf("image-idle-%d", i)))
		if err != nil {
			return nil, err
		}
		p, err := sandboxPss(rec.SandboxID)
		if err != nil {
			return nil, fmt.Errorf("image footprint: %w", err)
		}
		pss += p
		if env.Usage != nil {
			u, err := env.Usage.Usage(ctx, rec.SandboxID)
			if err != nil {
				return nil, fmt.Errorf("image footprint: %w", err)
			}
			cg += u.MemoryBytes
			disk += u.DiskBytes
		}
	}
	const mib = 1 << 20
	out := []Figure{{Name: fmt.Sprintf("image template: PSS per idle sandbox (python kernel up, mean of %d)", n), Value: round(float64(pss)/n/mib, 1), Unit: "MiB"}}
	if env.Usage != nil {
		out = append(out,
			Figure{Name: "image template: cgroup memory per idle sandbox (incl. page cache, writable layer)", Value: round(float64(cg)/n/mib, 1), Unit: "MiB"},
			Figure{Name: "image template: writable layer used per idle sandbox", Value: round(float64(disk)/n/1024, 1), Unit: "KiB"})
	}
	if env.ImageStoreDir != "" {
		if n, err := imageStoreSize(env.ImageStoreDir); err == nil {
			out = append(out, Figure{Name: "image template: image store on disk (shared layers, once per host)", Value: round(float64(n)/mib, 0), Unit: "MiB"})
		}
	}
	return out, nil
}

// imageStoreSize is the bytes under an image store's directory (its shared
// layers, unpacked once for every sandbox): the disk an image template costs
// once, beside what each sandbox adds.
func imageStoreSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() && !strings.Contains(p, string(filepath.Separator)+"staging"+string(filepath.Separator)) {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}
