package rules

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
)

// PrepareSnapshot checks a snapshot record before it is stored: a tenant
// of its own that ctx may write, the ids set; CreatedAt defaults to now.
func PrepareSnapshot(ctx context.Context, s *templates.Snapshot, now time.Time) error {
	if s.TenantID == "" || s.ID == "" || s.ContextID == "" || s.Template == "" {
		return fmt.Errorf("snapshot: tenant, id, context and template are required: %w", errdefs.ErrInvalidArgument)
	}
	if err := CheckTenant(ctx, s.TenantID); err != nil {
		return err
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now
	}
	s.CreatedAt = Time(s.CreatedAt)
	return nil
}

// SnapshotTemplateMissing is the error of a snapshot whose template is not
// its tenant's.
func SnapshotTemplateMissing(s templates.Snapshot) error {
	return fmt.Errorf("snapshot %s: tenant %s has no such template: %w", s.ID, s.TenantID, errdefs.ErrNotFound)
}
