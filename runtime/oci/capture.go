package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/layer"
	"github.com/sandlot/sandlot/runtime"
)

// Capture writes sandbox id's writable layer (the upper dir of its image
// root, imgroot.go) to w as an uncompressed layer tarball with the
// sandbox's ids mapped back to image ids, at most max file bytes.
//
// The sandbox is held still while its layer is read: a running one is
// paused and resumed after (whatever the capture's outcome), a paused one
// stays paused. The layer is the sandbox's and hostile: layer.Diff reads
// it through descriptors, follows no symlink, drops devices and counts
// apparent sizes. A sandbox on the host template has no such layer
// (failed_precondition).
func (r *Runtime) Capture(ctx context.Context, id string, w io.Writer, max int64) (err error) {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	ids, err := r.IDRange(id)
	if err != nil {
		return err
	}
	dir := r.rootDir(id)
	if !isMountPoint(dir) {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "sandbox %s has no image root (the host template): there is no layer to snapshot", id)
	}
	st, err := r.State(ctx, id)
	if err != nil {
		return err
	}
	switch st.Status {
	case runtime.StatusPaused:
	case runtime.StatusRunning:
		if err := r.Pause(ctx, id); err != nil {
			return fmt.Errorf("capture %s: %w", id, err)
		}
		defer func() {
			if rerr := r.Resume(context.WithoutCancel(ctx), id); rerr != nil {
				err = errors.Join(err, fmt.Errorf("capture %s: resume: %w", id, rerr))
			}
		}()
	default:
		return fmt.Errorf("sandbox %s is %s: %w", id, st.Status, errdefs.ErrFailedPrecondition)
	}
	_, err = layer.Diff(ctx, filepath.Join(dir, "upper"), w, layer.DiffOptions{HostIDBase: ids.Host(0), Limits: layer.Limits{MaxBytes: max}})
	return err
}
