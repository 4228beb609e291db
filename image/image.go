package image

import (
	"context"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandlot/sandlot/errdefs"
)

// Image is a stored image.
type Image struct {
	Digest   v1.Hash // of the manifest: the image's identity
	Manifest *v1.Manifest
	Config   *v1.ConfigFile
	Layers   []Layer // base first
}

// Layer is one unpacked layer of a stored image.
type Layer struct {
	DiffID v1.Hash // digest of the uncompressed tar
	Blob   v1.Hash // digest of the stored (compressed) blob
	Size   int64   // of the blob
	Dir    string  // the read-only tree: an overlayfs lowerdir
}

// LowerDirs returns the layer trees top first, the order overlayfs wants
// in lowerdir=.
func (img Image) LowerDirs() []string {
	out := make([]string, len(img.Layers))
	for i, l := range img.Layers {
		out[len(img.Layers)-1-i] = l.Dir
	}
	return out
}

// Get returns the image named ref: a name given to Tag or Put, or a
// manifest digest ("sha256:<hex>").
func (s *Store) Get(ctx context.Context, ref string) (Image, error) {
	if strings.HasPrefix(ref, "sha256:") {
		h, err := v1.NewHash(ref)
		if err != nil {
			return Image{}, fmt.Errorf("image: %q: %v: %w", ref, err, errdefs.ErrInvalidArgument)
		}
		return s.image(h)
	}
	h, err := s.Resolve(ctx, ref)
	if err != nil {
		return Image{}, err
	}
	return s.image(h)
}

func (s *Store) image(digest v1.Hash) (Image, error) {
	raw, err := s.readMeta(digest)
	if err != nil {
		return Image{}, err
	}
	m, err := v1.ParseManifest(strings.NewReader(string(raw)))
	if err != nil {
		return Image{}, fmt.Errorf("image: manifest %s: %w", digest, err)
	}
	rawConfig, err := s.readMeta(m.Config.Digest)
	if err != nil {
		return Image{}, err
	}
	m, cf, err := parse(raw, rawConfig)
	if err != nil {
		return Image{}, err
	}
	img := Image{Digest: digest, Manifest: m, Config: cf}
	for i, d := range m.Layers {
		diffID := cf.RootFS.DiffIDs[i]
		if !s.HasLayer(diffID) {
			return Image{}, fmt.Errorf("image: %s: layer %s is missing: %w", digest, diffID, errdefs.ErrNotFound)
		}
		img.Layers = append(img.Layers, Layer{DiffID: diffID, Blob: d.Digest, Size: d.Size, Dir: s.LayerDir(diffID)})
	}
	return img, nil
}

// V1 returns the stored image as a go-containerregistry image, to append
// layers to (image/build), push or export.
func (s *Store) V1(ctx context.Context, digest v1.Hash) (v1.Image, error) {
	if _, err := s.image(digest); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&storedImage{s: s, digest: digest})
}

type storedImage struct {
	s      *Store
	digest v1.Hash
}

var _ partial.CompressedImageCore = (*storedImage)(nil)

func (i *storedImage) RawManifest() ([]byte, error) { return i.s.readMeta(i.digest) }

func (i *storedImage) MediaType() (types.MediaType, error) {
	m, err := i.manifest()
	if err != nil {
		return "", err
	}
	if m.MediaType == "" {
		return types.OCIManifestSchema1, nil
	}
	return m.MediaType, nil
}

func (i *storedImage) manifest() (*v1.Manifest, error) {
	raw, err := i.RawManifest()
	if err != nil {
		return nil, err
	}
	return v1.ParseManifest(strings.NewReader(string(raw)))
}

func (i *storedImage) RawConfigFile() ([]byte, error) {
	m, err := i.manifest()
	if err != nil {
		return nil, err
	}
	return i.s.readMeta(m.Config.Digest)
}

func (i *storedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	m, err := i.manifest()
	if err != nil {
		return nil, err
	}
	if h == m.Config.Digest {
		return &storedBlob{s: i.s, desc: m.Config}, nil
	}
	for _, d := range m.Layers {
		if d.Digest == h {
			return &storedBlob{s: i.s, desc: d}, nil
		}
	}
	return nil, fmt.Errorf("image: %s has no layer %s: %w", i.digest, h, errdefs.ErrNotFound)
}

type storedBlob struct {
	s    *Store
	desc v1.Descriptor
}

func (b *storedBlob) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b *storedBlob) Size() (int64, error)                { return b.desc.Size, nil }
func (b *storedBlob) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
func (b *storedBlob) Compressed() (io.ReadCloser, error)  { return b.s.Blob(b.desc.Digest) }
