package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// volumeCase is what a volume costs (docs/volumes.md): its create (a
// sparse image and mkfs.ext4) and delete, and a cold create to a first
// write in it against the same create without a volume, interleaved so
// both see the same load. It runs on the image provider, whose sandboxes
// mount volumes (Env.Volumes opens them).
func volumeCase(env Env, sz Sizes) Case {
	return Case{Name: "volumes: create, and a cold create with one mounted", Group: "volumes", Run: func(ctx context.Context) ([]Figure, error) {
		img := env
		img.Provider = env.ImageProvider
		m, stop, err := manager(ctx, img, contexts.Config{PoolSize: -1})
		if err != nil {
			return nil, err
		}
		defer stop()
		var create, del, with, without []time.Duration
		for i := 0; i < sz.Cold+1; i++ {
			t0 := time.Now()
			v, err := env.Volumes.Create(ctx, benchTenant, fmt.Sprintf("bench-%d", i), 0)
			if err != nil {
				return nil, err
			}
			made := time.Since(t0)
			mount := []contexts.VolumeMount{{VolumeID: v.ID, Path: "/mnt/v"}}
			w, err := timedFirstWrite(ctx, m, ident(fmt.Sprintf("vol-%d", i)), mount)
			if err != nil {
				return nil, err
			}
			wo, err := timedFirstWrite(ctx, m, ident(fmt.Sprintf("novol-%d", i)), nil)
			if err != nil {
				return nil, err
			}
			t1 := time.Now()
			if err := env.Volumes.Delete(ctx, benchTenant, v.ID); err != nil {
				return nil, err
			}
			if i > 0 { // the first warms the host's page cache
				create, del = append(create, made), append(del, time.Since(t1))
				with, without = append(with, w), append(without, wo)
			}
		}
		return []Figure{
			Latency("volume create: 1 GiB, sparse image and mkfs.ext4", create),
			Latency("volume delete", del),
			Latency("cold create to a first write in a mounted volume (image template)", with),
			Latency("cold create to the same write in the home dir, no volume (image template)", without),
		}, nil
	}}
}

// timedFirstWrite times a new context of id with mounts (none: the home
// dir) from its create to a file written by python; the teardown is not
// timed.
func timedFirstWrite(ctx context.Context, m *contexts.Manager, id contexts.Identity, mounts []contexts.VolumeMount) (time.Duration, error) {
	dir := "/home/user"
	if len(mounts) > 0 {
		dir = mounts[0].Path
	}
	t0 := time.Now()
	rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{Volumes: mounts})
	if err != nil {
		return 0, err
	}
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: fmt.Sprintf("open(%q, 'w').write('x')", dir+"/f")}, nil)
	if err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if err := check(res, "1"); err != nil {
		return 0, err
	}
	return took, m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted)
}
