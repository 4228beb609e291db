package image

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// StagedLayer is a layer written into the store's staging area by
// NewLayer, ready to be appended to an image and Put. It implements
// v1.Layer with digests computed while it was written.
type StagedLayer struct {
	path   string
	digest v1.Hash
	diffID v1.Hash
	size   int64
	// stored: path is the store's own uncompressed blob (NewTarLayer);
	// Close leaves it, and its media type is an uncompressed layer.
	stored bool
}

var _ v1.Layer = (*StagedLayer)(nil)

// NewLayer calls write with a writer for an uncompressed layer tarball
// and stages the result gzip-compressed, computing its digest and diff ID
// in the same pass. Close the layer once it has been Put. Hold a lease
// until then: GC empties the staging area.
func (s *Store) NewLayer(ctx context.Context, write func(w io.Writer) error) (*StagedLayer, error) {
	f, err := os.CreateTemp(s.root+"/tmp", "staged-")
	if err != nil {
		return nil, err
	}
	l := &StagedLayer{path: f.Name()}
	ok := false
	defer func() {
		f.Close()
		if !ok {
			os.Remove(l.path)
		}
	}()
	compressed, uncompressed := v1Hasher(), v1Hasher()
	cw := &countWriter{w: io.MultiWriter(f, compressed)}
	zw, err := gzip.NewWriterLevel(cw, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if err := write(io.MultiWriter(zw, uncompressed)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.digest, l.diffID, l.size = compressed.sum(), uncompressed.sum(), cw.n
	ok = true
	return l, nil
}

// Close removes the staged file (a layer NewTarLayer stored stays).
func (l *StagedLayer) Close() error {
	if l.stored {
		return nil
	}
	return os.Remove(l.path)
}

func (l *StagedLayer) Digest() (v1.Hash, error)           { return l.digest, nil }
func (l *StagedLayer) DiffID() (v1.Hash, error)           { return l.diffID, nil }
func (l *StagedLayer) Size() (int64, error)               { return l.size, nil }
func (l *StagedLayer) Compressed() (io.ReadCloser, error) { return os.Open(l.path) }

func (l *StagedLayer) MediaType() (types.MediaType, error) {
	if l.stored {
		return types.OCIUncompressedLayer, nil
	}
	return types.OCILayer, nil
}

func (l *StagedLayer) Uncompressed() (io.ReadCloser, error) {
	if l.stored {
		return os.Open(l.path)
	}
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("image: staged layer: %w", err)
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, f}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
