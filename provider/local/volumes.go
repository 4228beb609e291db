package local

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/volumes"
)

// Volumes opens the volumes a sandbox mounts: volumes.Service, which
// records the mount (so the volume is not deleted while the context
// lives) and returns the volume's file system as a detached mount.
type Volumes interface {
	Open(ctx context.Context, tenantID, contextID string, m volumes.Mount) (int, error)
}

// openVolumes opens spec's volumes for the runtime and returns them with
// the function that closes them, to call once the runtime has made the
// sandbox's own clones.
func (p *Provider) openVolumes(ctx context.Context, spec contexts.Spec, imageRoot bool) ([]runtime.Volume, func(), error) {
	if len(spec.Volumes) == 0 {
		return nil, func() {}, nil
	}
	if p.volumes == nil {
		return nil, nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are not enabled on this daemon")
	}
	if !imageRoot {
		return nil, nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are mounted only in sandboxes of image templates, not the host template")
	}
	var out []runtime.Volume
	closeAll := func() {
		for _, v := range out {
			unix.Close(v.FD)
		}
	}
	for _, m := range spec.Volumes {
		fd, err := p.volumes.Open(ctx, spec.Labels[contexts.LabelTenant], spec.Labels[contexts.LabelContext], m)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		out = append(out, runtime.Volume{FD: fd, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return out, closeAll, nil
}
