package image

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/layer"
)

// PutOptions configures Put. Zero values are documented per field.
type PutOptions struct {
	// Name, when set, names the image once it is complete, only when the
	// name is new or names this image already (TagNew): a name of another
	// image fails the Put with already_exists and stays where it was (the
	// content stays too, unnamed, until GC). Without a name the image is
	// garbage unless the caller tags it or passes it to GC as kept while
	// holding a lease.
	Name string
	// Progress, when set, is called as layers are fetched and unpacked.
	Progress func(Progress)
	// Untrusted says img is a tenant's (an upload, a tenant's pull): each
	// layer must prove its content, since in a store that tenants share a
	// digest is a name anyone may learn (prove.go). Every blob is read
	// from img and checked against its digest, also when the store holds
	// it, and a stored layer tree serves the image only if it was
	// unpacked from that blob or the blob uncompresses to its diff id.
	Untrusted bool
}

// Progress reports one step of a Put.
type Progress struct {
	Layer      v1.Hash // diff ID
	Index, Of  int     // layer number (from 1) and count
	Phase      string  // "fetch", "unpack", "done", "cached"
	Bytes      int64   // compressed bytes fetched so far (phase "fetch")
	TotalBytes int64   // compressed size, when known
}

// Put stores img: its layers (fetched and unpacked once, verified against
// their digests and the config's diff IDs), config and manifest. It
// returns the stored image, whose Digest is the manifest digest.
func (s *Store) Put(ctx context.Context, img v1.Image, opt PutOptions) (Image, error) {
	if opt.Name != "" {
		if err := checkName(opt.Name); err != nil {
			return Image{}, err
		}
	}
	lease, err := s.Lease(ctx)
	if err != nil {
		return Image{}, err
	}
	defer lease.Release()

	rawManifest, err := img.RawManifest()
	if err != nil {
		return Image{}, fmt.Errorf("image: manifest: %w", err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("image: config: %w", err)
	}
	if len(rawManifest) > maxMetaBytes || len(rawConfig) > maxMetaBytes {
		return Image{}, fmt.Errorf("image: manifest or config over %d bytes: %w", maxMetaBytes, errdefs.ErrInvalidArgument)
	}
	m, cf, err := parse(rawManifest, rawConfig)
	if err != nil {
		return Image{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return Image{}, fmt.Errorf("image: layers: %w", err)
	}
	if len(layers) != len(m.Layers) {
		return Image{}, fmt.Errorf("image: %d layers for %d in the manifest: %w", len(layers), len(m.Layers), errdefs.ErrInvalidArgument)
	}
	for i, l := range layers {
		if opt.Untrusted {
			if err := s.proveBlob(ctx, l, m.Layers[i]); err != nil {
				return Image{}, err
			}
		}
		if err := s.putLayer(ctx, l, m.Layers[i], cf.RootFS.DiffIDs[i], i+1, len(layers), opt.Progress); err != nil {
			return Image{}, err
		}
		if opt.Untrusted {
			if err := s.proveTree(ctx, m.Layers[i].Digest, cf.RootFS.DiffIDs[i]); err != nil {
				return Image{}, err
			}
		}
	}
	if _, err := s.writeBytes(rawConfig); err != nil {
		return Image{}, err
	}
	// The manifest goes last: its presence means the image is complete.
	digest, err := s.writeBytes(rawManifest)
	if err != nil {
		return Image{}, err
	}
	if opt.Name != "" {
		if err := s.tag(opt.Name, digest, false); err != nil {
			return Image{}, err
		}
	}
	return s.image(digest)
}

// parse checks a manifest and its config against each other.
func parse(rawManifest, rawConfig []byte) (*v1.Manifest, *v1.ConfigFile, error) {
	m, err := v1.ParseManifest(bytes.NewReader(rawManifest))
	if err != nil {
		return nil, nil, fmt.Errorf("image: manifest: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	switch m.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2, "":
	default:
		return nil, nil, fmt.Errorf("image: manifest media type %q: not an image manifest: %w", m.MediaType, errdefs.ErrInvalidArgument)
	}
	var cf v1.ConfigFile
	if err := json.Unmarshal(rawConfig, &cf); err != nil {
		return nil, nil, fmt.Errorf("image: config: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return nil, nil, fmt.Errorf("image: config has %d diff ids for %d layers: %w", len(cf.RootFS.DiffIDs), len(m.Layers), errdefs.ErrInvalidArgument)
	}
	for i, d := range m.Layers {
		if err := checkHash(d.Digest); err != nil {
			return nil, nil, err
		}
		if err := checkHash(cf.RootFS.DiffIDs[i]); err != nil {
			return nil, nil, err
		}
		if !d.MediaType.IsDistributable() {
			return nil, nil, fmt.Errorf("image: layer %s is non-distributable (%s): %w", d.Digest, d.MediaType, errdefs.ErrInvalidArgument)
		}
	}
	if err := checkHash(m.Config.Digest); err != nil {
		return nil, nil, err
	}
	return m, &cf, nil
}

// putLayer makes sure the blob and the unpacked tree of one layer are
// stored. Within this process one unpack per diff ID runs at a time; the
// others wait for it.
func (s *Store) putLayer(ctx context.Context, l v1.Layer, desc v1.Descriptor, diffID v1.Hash, i, n int, progress func(Progress)) error {
	report := func(p Progress) {
		if progress != nil {
			p.Layer, p.Index, p.Of = diffID, i, n
			progress(p)
		}
	}
	for {
		if s.HasLayer(diffID) && s.HasBlob(desc.Digest) {
			report(Progress{Phase: "cached", TotalBytes: desc.Size})
			return nil
		}
		s.mu.Lock()
		f, busy := s.flights[diffID]
		if !busy {
			f = &flight{done: make(chan struct{})}
			s.flights[diffID] = f
		}
		s.mu.Unlock()
		if busy {
			select {
			case <-f.done:
				if f.err != nil {
					return f.err
				}
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		f.err = s.fetchAndUnpack(ctx, l, desc, diffID, report)
		s.mu.Lock()
		delete(s.flights, diffID)
		s.mu.Unlock()
		close(f.done)
		return f.err
	}
}

func (s *Store) fetchAndUnpack(ctx context.Context, l v1.Layer, desc v1.Descriptor, diffID v1.Hash, report func(Progress)) error {
	if !s.HasBlob(desc.Digest) {
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("image: fetch layer %s: %w", desc.Digest, err)
		}
		pr := &progressReader{r: rc, stop: ctx.Err, report: func(b int64) { report(Progress{Phase: "fetch", Bytes: b, TotalBytes: desc.Size}) }}
		err = s.writeBlob(pr, desc.Digest, s.cfg.MaxBlobBytes)
		rc.Close()
		if err != nil {
			return err
		}
	}
	if s.HasLayer(diffID) {
		report(Progress{Phase: "done", TotalBytes: desc.Size})
		return nil
	}
	report(Progress{Phase: "unpack", TotalBytes: desc.Size})
	start := time.Now()
	st, err := s.unpack(ctx, desc.Digest, diffID)
	if err != nil {
		return err
	}
	s.log.Info("image layer unpacked", "diff_id", diffID.String(), "entries", st.Entries, "bytes", st.Bytes,
		"skipped_devices", st.SkippedDevices, "stripped_setid", st.StrippedSetID, "clamped_ids", st.ClampedIDs,
		"duration", time.Since(start))
	report(Progress{Phase: "done", TotalBytes: desc.Size})
	return nil
}

// unpack applies the stored blob into layers/<diffID>, checking that its
// uncompressed content has that digest.
func (s *Store) unpack(ctx context.Context, blob, diffID v1.Hash) (layer.Stats, error) {
	f, err := s.Blob(blob)
	if err != nil {
		return layer.Stats{}, err
	}
	defer f.Close()
	r, err := decompress(f)
	if err != nil {
		return layer.Stats{}, fmt.Errorf("image: layer %s: %w", blob, err)
	}
	defer r.Close()
	stage, err := s.tempDir("layer-")
	if err != nil {
		return layer.Stats{}, err
	}
	defer os.RemoveAll(stage)
	tree := filepath.Join(stage, "root")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return layer.Stats{}, err
	}
	hw := v1Hasher()
	st, err := layer.Apply(ctx, tree, io.TeeReader(r, hw), s.cfg.Limits)
	if err != nil {
		return st, fmt.Errorf("image: unpack layer %s: %w", diffID, err)
	}
	// The tar reader stops at the end-of-archive marker; the digest covers
	// whatever padding follows it too.
	if _, err := io.Copy(hw, io.LimitReader(r, 1<<20)); err != nil {
		return st, fmt.Errorf("image: layer %s: %v: %w", blob, err, errdefs.ErrInvalidArgument)
	}
	if got := hw.sum(); got != diffID {
		return st, fmt.Errorf("image: layer %s has diff id %s, the config says %s: %w", blob, got, diffID, errdefs.ErrInvalidArgument)
	}
	if err := writeJSON(filepath.Join(stage, "layer.json"), layerRecord{DiffID: diffID, Blob: blob, Unpacked: time.Now().UTC(), Stats: st}); err != nil {
		return st, err
	}
	if err := os.Chmod(stage, 0o700); err != nil {
		return st, err
	}
	err = os.Rename(stage, s.layerPath(diffID))
	if err != nil && s.HasLayer(diffID) {
		return st, nil // another process unpacked it first
	}
	return st, err
}

// decompress picks the layer's compression by its magic number rather than
// its declared media type, which docker archives do not carry.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
		}
		return zr, nil
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderMaxMemory(256<<20))
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
		}
		return zr.IOReadCloser(), nil
	default:
		return io.NopCloser(br), nil
	}
}

type progressReader struct {
	r      io.Reader
	stop   func() error // the caller's ctx.Err: a fetch ends with its context
	n      int64
	last   time.Time
	report func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	if err := p.stop(); err != nil {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	if time.Since(p.last) > 200*time.Millisecond || err == io.EOF {
		p.last = time.Now()
		p.report(p.n)
	}
	return n, err
}
