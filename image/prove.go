package image

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/errdefs"
)

// A store shared by tenants keeps one blob and one tree per digest, so a
// digest is a name too: whoever learns the digests of another tenant's
// private layer could write a manifest naming them, and the store, which
// skips what it has, would hand over the layer without ever seeing its
// bytes. For an untrusted image (PutOptions.Untrusted) every layer proves
// its content instead: its blob is read from the image whatever the store
// has (proveBlob), and the tree the image gets is one made from that blob,
// or the blob uncompresses to the tree's diff id (proveTree).

// proveBlob reads the compressed bytes of l from its source and checks
// them against desc's digest, when the store already has that blob (a
// blob it lacks is fetched and checked by putLayer).
func (s *Store) proveBlob(ctx context.Context, l v1.Layer, desc v1.Descriptor) error {
	if !s.HasBlob(desc.Digest) {
		return nil
	}
	rc, err := l.Compressed()
	if err != nil {
		return fmt.Errorf("image: layer %s: the image does not hold its bytes (%v): %w", desc.Digest, err, errdefs.ErrInvalidArgument)
	}
	defer rc.Close()
	return s.checkDigest(ctx, rc, desc.Digest, "its bytes", s.cfg.MaxBlobBytes)
}

// proveTree checks that the stored tree of diffID holds what blob
// uncompresses to: it was unpacked from blob, or blob's tar has diffID's
// digest (the same tar compressed otherwise, or a config naming another
// layer's diff id). Precondition: blob and the tree are stored, and the
// caller holds a lease.
func (s *Store) proveTree(ctx context.Context, blob, diffID v1.Hash) error {
	b, err := os.ReadFile(filepath.Join(s.layerPath(diffID), "layer.json"))
	if err != nil {
		return err
	}
	var rec layerRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("image: layer %s: %w", diffID, err)
	}
	if rec.Blob == blob {
		return nil
	}
	f, err := s.Blob(blob)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := decompress(f)
	if err != nil {
		return fmt.Errorf("image: layer %s: %w", blob, err)
	}
	defer r.Close()
	// What unpacking the layer would allow, plus headers: a bound for a
	// blob that inflates without end.
	lim := s.cfg.Limits
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = 16 << 30
	}
	if lim.MaxEntries <= 0 {
		lim.MaxEntries = 1 << 20
	}
	return s.checkDigest(ctx, r, diffID, "the tar of blob "+blob.String(), lim.MaxBytes+int64(lim.MaxEntries)*4096+1<<30)
}

// checkDigest reads r to its end (at most max bytes, stopping with ctx)
// and compares its digest with want.
func (s *Store) checkDigest(ctx context.Context, r io.Reader, want v1.Hash, what string, max int64) error {
	hw := v1Hasher()
	pr := &progressReader{r: r, stop: ctx.Err, report: func(int64) {}}
	n, err := io.Copy(hw, io.LimitReader(pr, max+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("image: layer %s: %s: %v: %w", want, what, err, errdefs.ErrInvalidArgument)
	case n > max:
		return fmt.Errorf("image: layer %s: %s: over %d bytes: %w", want, what, max, errdefs.ErrResourceExhausted)
	}
	if got := hw.sum(); got != want {
		return fmt.Errorf("image: layer %s: %s: digest %s: %w", want, what, got, errdefs.ErrInvalidArgument)
	}
	return nil
}
