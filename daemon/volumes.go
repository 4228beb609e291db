package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/sandlot/sandlot/internal/datadir"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/volumes"
)

// newVolumes is the daemon's volumes (docs/volumes.md), kept in
// DATA/volumes, when it runs the local provider with a data dir; nil
// otherwise, or when the host cannot keep them (no mkfs.ext4), which it
// logs: sandboxes then refuse volume mounts and the volume routes say
// volumes are not enabled.
func newVolumes(cfg Config, st store.Backend, log *slog.Logger) *volumes.Service {
	if !cfg.uses("local") || cfg.DataDir == "" {
		return nil
	}
	h, err := volumes.NewHost(filepath.Join(cfg.DataDir, datadir.Volumes))
	if err != nil {
		log.Warn("volumes are off", logkey.Err, err)
		return nil
	}
	return volumes.NewService(st, h, volumes.Config{Logger: log})
}

// volumeSweepInterval is how often the files of volumes whose record is
// gone (their tenant was deleted) are removed.
const volumeSweepInterval = 10 * time.Minute

// sweepVolumes removes, now and every volumeSweepInterval until ctx ends,
// the files of volumes that have no record and are older than the
// interval (a create writes the file first).
func sweepVolumes(ctx context.Context, vs *volumes.Service, log *slog.Logger) {
	t := time.NewTicker(volumeSweepInterval)
	defer t.Stop()
	for {
		if _, err := vs.Sweep(ctx, volumeSweepInterval); err != nil && ctx.Err() == nil {
			log.Warn("volume sweep", logkey.Err, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
