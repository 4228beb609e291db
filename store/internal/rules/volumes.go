package rules

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

// PrepareVolume validates v for CreateVolume under ctx's scope (a scoped
// ctx writes only its own tenant's volumes) and fills its ID and creation
// time.
func PrepareVolume(ctx context.Context, v *volumes.Volume, now time.Time) error {
	if err := CheckTenant(ctx, v.TenantID); err != nil {
		return err
	}
	return volumes.Prepare(v, now)
}

// CheckVolumeList rejects listing every tenant's volumes (tenantID "")
// under a tenant-scoped ctx.
func CheckVolumeList(ctx context.Context, tenantID string) error {
	if _, ok := tenant.FromContext(ctx); ok && tenantID == "" {
		return fmt.Errorf("every tenant's volumes: %w", errdefs.ErrPermissionDenied)
	}
	return nil
}

// PickVolume chooses what ref means among rows (one tenant's volumes
// named ref or with id ref): the one of that name, else the one of that
// id.
func PickVolume(rows []volumes.Volume, ref string) (volumes.Volume, error) {
	for _, v := range rows {
		if v.Name == ref {
			return v, nil
		}
	}
	for _, v := range rows {
		if v.ID == ref {
			return v, nil
		}
	}
	return volumes.Volume{}, volumes.NotFound(ref)
}
