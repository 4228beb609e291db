package contexts

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sandlot/sandlot/errdefs"
)

// Capturer writes a sandbox's filesystem, its writable layer over its
// template's image, as an uncompressed OCI layer tarball (CapSnapshot).
// provider/local holds the sandbox still while it reads (a running one is
// frozen and thawed after; a paused one stays paused) and reads the layer
// on the host as hostile input (image/layer.Diff). max bounds the file
// bytes (apparent sizes); past it the capture is resource_exhausted. A
// sandbox on a template without an image (host) is failed_precondition.
// docs/state-snapshots.md.
type Capturer interface {
	Capture(ctx context.Context, sandboxID string, w io.Writer, max int64) error
}

// Capture writes the filesystem of tenantID's active, ready context to w
// (Capturer), paused or not, holding the context's identity lock so that
// no pause, resume or end runs meanwhile. A provider without CapSnapshot
// is failed_precondition before anything is locked.
func (m *Manager) Capture(ctx context.Context, tenantID, contextID string, w io.Writer, max int64) (*Record, error) {
	if !m.provider.Capabilities().Has(CapSnapshot) {
		return nil, fmt.Errorf("snapshot of context %s: %w", contextID, NotSupported(m.provider.Name(), CapSnapshot))
	}
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rec.Suspended() {
		return nil, fmt.Errorf("snapshot of context %s: wake it first: %w", contextID, ErrSuspended)
	}
	if err := m.provider.Capture(ctx, rec.SandboxID, w, max); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			if m.terminateRecord(ctx, rec, ReasonError, "sandbox lost") {
				m.markLost(rec.Identity)
			}
			return nil, fmt.Errorf("context %s: its sandbox is gone: %w", contextID, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("snapshot of context %s: %w", contextID, err)
	}
	return rec, nil
}
