package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/layer"
)

// NewTarLayer stores a layer made on this host in one pass: write's
// uncompressed tarball is hashed, kept as an uncompressed blob (media type
// OCI layer tar, digest = diff ID) and unpacked into the layer tree while
// it streams, so no compression and no second read happen. It is for
// large local layers (the Debian base: gzip and a separate unpack cost
// minutes there); NewLayer, which compresses, suits layers that will be
// pushed. The returned layer is already in the store: Put finds its blob
// and tree and only writes the manifest. Hold a lease until then.
func (s *Store) NewTarLayer(ctx context.Context, write func(w io.Writer) error) (*StagedLayer, error) {
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "staged-")
	if err != nil {
		return nil, err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name()) // renamed into blobs/ on success
	}()
	stage, err := s.tempDir("layer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	tree := filepath.Join(stage, "root")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return nil, err
	}

	start := time.Now()
	pr, pw := io.Pipe()
	type applied struct {
		st  layer.Stats
		err error
	}
	done := make(chan applied, 1)
	go func() {
		st, err := layer.Apply(ctx, tree, pr, s.cfg.Limits)
		if err == nil {
			// Whatever follows the end-of-archive marker (padding) is
			// part of the digest; keep reading so the writer finishes.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(err)
		done <- applied{st, err}
	}()
	h := v1Hasher()
	cw := &countWriter{w: io.MultiWriter(f, h, pw)}
	werr := write(cw)
	pw.CloseWithError(werr)
	res := <-done
	if werr != nil {
		return nil, werr
	}
	if res.err != nil {
		return nil, fmt.Errorf("image: unpack local layer: %w", res.err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	diffID := h.sum()
	if cw.n > s.cfg.MaxBlobBytes {
		return nil, fmt.Errorf("image: local layer over %d bytes: %w", s.cfg.MaxBlobBytes, errdefs.ErrResourceExhausted)
	}
	if err := f.Chmod(0o444); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if !s.HasBlob(diffID) {
		if err := os.Rename(f.Name(), s.blobPath(diffID)); err != nil {
			return nil, err
		}
	}
	if !s.HasLayer(diffID) {
		if err := writeJSON(filepath.Join(stage, "layer.json"), layerRecord{DiffID: diffID, Blob: diffID, Unpacked: time.Now().UTC(), Stats: res.st}); err != nil {
			return nil, err
		}
		if err := os.Chmod(stage, 0o700); err != nil {
			return nil, err
		}
		if err := os.Rename(stage, s.layerPath(diffID)); err != nil && !s.HasLayer(diffID) {
			return nil, err
		}
	}
	s.log.Info("image layer unpacked", "diff_id", diffID.String(), "entries", res.st.Entries, "bytes", res.st.Bytes,
		"skipped_devices", res.st.SkippedDevices, "stripped_setid", res.st.StrippedSetID, "clamped_ids", res.st.ClampedIDs,
		"duration", time.Since(start), "streamed", true)
	return &StagedLayer{path: s.blobPath(diffID), digest: diffID, diffID: diffID, size: cw.n, stored: true}, nil
}
