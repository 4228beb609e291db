package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/logkey"
)

// GCStats tells what a GC removed.
type GCStats struct {
	Images, Blobs, Layers int   // images kept; blobs and layers removed
	FreedBytes            int64 // bytes of removed blobs and layer trees
}

// GC removes every blob and layer that no named image and no image in keep
// uses, and what is left in tmp/ older than TmpGrace. keep is for images
// in use without a name (sandboxes whose template was deleted).
//
// GC waits (until ctx ends) for every lease to be released and holds the
// store exclusively while it runs, so a concurrent Put, Tag or build
// either finishes first or starts after.
func (s *Store) GC(ctx context.Context, keep ...v1.Hash) (GCStats, error) {
	return s.GCFunc(ctx, func(context.Context) ([]v1.Hash, error) { return keep, nil })
}

// GCFunc is GC with the images in use asked for once the store is held
// exclusively: a sandbox created from an image holds a lease until it
// shows in what live returns (the runtime's list), so no image can start
// being used between the question and the sweep. An error from live
// stops the GC before anything is removed.
func (s *Store) GCFunc(ctx context.Context, live func(context.Context) ([]v1.Hash, error)) (GCStats, error) {
	f, err := s.lockFile(ctx, unix.LOCK_EX)
	if err != nil {
		return GCStats{}, err
	}
	defer f.Close()

	keep, err := live(ctx)
	if err != nil {
		return GCStats{}, fmt.Errorf("image gc: images in use: %w", err)
	}
	refs, err := s.readRefs()
	if err != nil {
		return GCStats{}, err
	}
	roots := append([]v1.Hash(nil), keep...)
	for _, r := range refs {
		roots = append(roots, r.Digest)
	}
	blobs, layers := map[string]bool{}, map[string]bool{}
	var st GCStats
	seen := map[v1.Hash]bool{}
	for _, d := range roots {
		if seen[d] {
			continue
		}
		seen[d] = true
		img, err := s.image(d)
		if err != nil {
			// A broken root keeps what it still names; the rest goes.
			s.log.Warn("image gc: root unreadable", "digest", d.String(), logkey.Err, err)
			blobs[d.Hex] = true
			continue
		}
		st.Images++
		blobs[d.Hex], blobs[img.Manifest.Config.Digest.Hex] = true, true
		for _, l := range img.Layers {
			blobs[l.Blob.Hex], layers[l.DiffID.Hex] = true, true
		}
	}
	sweep := func(dir string, keep map[string]bool, n *int) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if keep[e.Name()] {
				continue
			}
			p := filepath.Join(dir, e.Name())
			st.FreedBytes += du(p)
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("image gc: %w", err)
			}
			*n++
		}
		return nil
	}
	if err := sweep(filepath.Join(s.root, "blobs", "sha256"), blobs, &st.Blobs); err != nil {
		return st, err
	}
	if err := sweep(filepath.Join(s.root, "layers", "sha256"), layers, &st.Layers); err != nil {
		return st, err
	}
	var tmp int
	if err := sweep(filepath.Join(s.root, "tmp"), freshTmp(filepath.Join(s.root, "tmp")), &tmp); err != nil {
		return st, err
	}
	s.log.Info("image gc", "images", st.Images, "blobs_removed", st.Blobs, "layers_removed", st.Layers, "freed_bytes", st.FreedBytes)
	return st, nil
}

// TmpGrace is how long GC leaves an entry of tmp/ alone after its last
// change. Writers hold a lease while they stage (GC waits for leases), but
// an E2B template build's context waits in tmp/ without one: its uploads
// land, then its start comes, or not (the build queue drops a build never
// started after an hour, and its context with it). A lease held that long
// would stop every GC. Leftovers of a crashed writer go at the first GC
// after the grace.
const TmpGrace = 2 * time.Hour

// freshTmp names the entries of dir changed within TmpGrace.
func freshTmp(dir string) map[string]bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	fresh := map[string]bool{}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) < TmpGrace {
			fresh[e.Name()] = true
		}
	}
	return fresh
}

// du sums the allocated bytes under p without following symlinks.
func du(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if s, ok := info.Sys().(*syscall.Stat_t); ok {
				n += s.Blocks * 512
			}
		}
		return nil
	})
	return n
}
