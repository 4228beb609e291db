package contexts

import (
	"context"

	"github.com/sandlot/sandlot/volumes"
)

// VolumeMount is a volume a new context's sandbox mounts
// (CreateOptions.Volumes, Spec.Volumes): a volume of the context's
// tenant by id, at a path, read-only or not. The edges resolve names and
// check paths (volumes.Service.Resolve); the provider opens the volume
// (provider/local) and records the mount, so a volume a live context
// mounts is never deleted.
type VolumeMount = volumes.Mount

// VolumeLister lists the volumes a context mounts (volumes.Service).
type VolumeLister interface {
	Mounts(ctx context.Context, tenantID, contextID string) ([]volumes.Mounted, error)
}
