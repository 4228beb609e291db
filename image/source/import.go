package source

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
)

// ImportOptions configures the imports. Zero values are documented per field.
type ImportOptions struct {
	// Name names the image when the archive holds exactly one, only when
	// the name is new (image.PutOptions.Name: already_exists over another
	// image's name). "": the image is stored without a name; hold a lease
	// until something keeps it (a template record), or GC removes it. The
	// archive's own names (RepoTags, annotations) never name anything in
	// the store: they are whatever the archive's author wrote, and store
	// names are shared by every user of the store (Imported.Ref reports
	// them).
	Name string
	// MaxBytes bounds one file extracted from an OCI layout tarball;
	// 0: 8 GiB.
	MaxBytes int64
	// Progress, when set, reports layers as they are unpacked.
	Progress func(image.Progress)
	// Untrusted: the archive is a tenant's upload, whose layers must
	// prove their content (image.PutOptions.Untrusted).
	Untrusted bool
}

// Imported is one image of an archive.
type Imported struct {
	image.Image
	Name string // the store name given (ImportOptions.Name); "" when none
	// Ref is the archive's own name for the image (a docker archive's
	// first RepoTag, normalized; an OCI layout's io.containerd.image.name
	// or org.opencontainers.image.ref.name annotation); "" when none.
	// Information only: the store is not named after it.
	Ref string
}

// ImportFile imports every linux/amd64 image of a tarball: an OCI image
// layout (it has an oci-layout file) or a docker archive (manifest.json).
func ImportFile(ctx context.Context, s *image.Store, path string, opt ImportOptions) ([]Imported, error) {
	names, err := tarNames(path)
	if err != nil {
		return nil, err
	}
	switch {
	case names["oci-layout"] && names["index.json"]:
		dir, err := os.MkdirTemp(filepath.Join(s.Root(), "tmp"), "oci-layout-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := extractLayout(path, dir, opt.MaxBytes); err != nil {
			return nil, err
		}
		return ImportLayout(ctx, s, dir, opt)
	case names["manifest.json"]:
		return importDocker(ctx, s, path, opt)
	default:
		return nil, fmt.Errorf("source: %s is neither an OCI layout nor a docker archive: %w", path, errdefs.ErrInvalidArgument)
	}
}

// tarNames lists the top-level regular files of a tarball.
func tarNames(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	defer f.Close()
	out := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("source: %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
		}
		if h.Typeflag == tar.TypeReg {
			out[strings.TrimPrefix(h.Name, "./")] = true
		}
	}
}

// layoutFile is every name an OCI layout tarball may contribute. Nothing
// else is extracted: no links, no directories of the archive's choosing.
var layoutFile = regexp.MustCompile(`^(oci-layout|index\.json|blobs/sha256/[0-9a-f]{64})$`)

func extractLayout(path, dir string, max int64) error {
	if max <= 0 {
		max = 8 << 30
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("source: %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
		}
		n := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag != tar.TypeReg || !layoutFile.MatchString(n) {
			continue
		}
		if h.Size > max {
			return fmt.Errorf("source: %s: %s over %d bytes: %w", path, n, max, errdefs.ErrResourceExhausted)
		}
		// The name matched a fixed pattern: it cannot climb out of dir.
		out, err := os.OpenFile(filepath.Join(dir, n), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("source: %s: %s: %v: %w", path, n, err, errdefs.ErrInvalidArgument)
		}
		_, err = io.Copy(out, io.LimitReader(tr, h.Size))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("source: %s: %s: %w", path, n, err)
		}
	}
}

// ImportLayout imports every linux/amd64 image of an OCI image layout
// directory. For a multi-platform index it takes the linux/amd64 image.
func ImportLayout(ctx context.Context, s *image.Store, dir string, opt ImportOptions) ([]Imported, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("source: OCI layout %s: %v: %w", dir, err, errdefs.ErrInvalidArgument)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("source: OCI layout %s: %v: %w", dir, err, errdefs.ErrInvalidArgument)
	}
	type entry struct {
		img       v1.Image
		name, ref string
	}
	var ents []entry
	for _, d := range im.Manifests {
		var img v1.Image
		switch {
		case d.MediaType.IsImage():
			img, err = idx.Image(d.Digest)
		case d.MediaType.IsIndex():
			var child v1.ImageIndex
			child, err = idx.ImageIndex(d.Digest)
			if err == nil {
				img, err = platformImage(child)
			}
		default:
			continue
		}
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // an index without linux/amd64
		}
		if err != nil {
			return nil, fmt.Errorf("source: OCI layout %s: %s: %v: %w", dir, d.Digest, err, errdefs.ErrInvalidArgument)
		}
		if d.Platform != nil && (d.Platform.OS != Platform.OS || d.Platform.Architecture != Platform.Architecture) {
			continue
		}
		n := d.Annotations["io.containerd.image.name"]
		if n == "" {
			n = d.Annotations["org.opencontainers.image.ref.name"]
		}
		ents = append(ents, entry{img: img, ref: n})
	}
	if len(ents) == 0 {
		return nil, fmt.Errorf("source: OCI layout %s has no linux/amd64 image: %w", dir, errdefs.ErrInvalidArgument)
	}
	if opt.Name != "" {
		if len(ents) != 1 {
			return nil, fmt.Errorf("source: OCI layout %s holds %d images: a name fits one: %w", dir, len(ents), errdefs.ErrInvalidArgument)
		}
		ents[0].name = opt.Name
	}
	var out []Imported
	for _, e := range ents {
		got, err := put(ctx, s, e.img, image.PutOptions{Name: e.name, Progress: opt.Progress, Untrusted: opt.Untrusted})
		if err != nil {
			return out, err
		}
		got.Ref = e.ref
		out = append(out, got)
	}
	return out, nil
}

func platformImage(idx v1.ImageIndex) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == Platform.OS && d.Platform.Architecture == Platform.Architecture && d.MediaType.IsImage() {
			return idx.Image(d.Digest)
		}
	}
	return nil, errdefs.ErrNotFound
}

func put(ctx context.Context, s *image.Store, img v1.Image, opt image.PutOptions) (Imported, error) {
	if err := checkPlatform(img); err != nil {
		return Imported{}, fmt.Errorf("source: import: %w", err)
	}
	stored, err := s.Put(ctx, img, opt)
	if err != nil {
		return Imported{}, fmt.Errorf("source: import: %w", err)
	}
	return Imported{Image: stored, Name: opt.Name}, nil
}

// importDocker imports each image of a docker archive (docker save). The
// archive's entries are only ever read by name from the tar stream, never
// extracted, so its paths cannot reach the file system.
func importDocker(ctx context.Context, s *image.Store, path string, opt ImportOptions) ([]Imported, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("source: docker archive %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	if opt.Name != "" && len(m) != 1 {
		return nil, fmt.Errorf("source: docker archive %s holds %d images: a name fits one: %w", path, len(m), errdefs.ErrInvalidArgument)
	}
	var out []Imported
	for _, d := range m {
		var tag *name.Tag
		ref := ""
		if len(d.RepoTags) > 0 {
			t, err := name.NewTag(d.RepoTags[0])
			if err != nil {
				return out, fmt.Errorf("source: docker archive %s: tag %q: %v: %w", path, d.RepoTags[0], err, errdefs.ErrInvalidArgument)
			}
			tag = &t
			ref = t.Name()
		} else if len(m) != 1 {
			return out, fmt.Errorf("source: docker archive %s: an untagged image among %d: %w", path, len(m), errdefs.ErrInvalidArgument)
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return out, fmt.Errorf("source: docker archive %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
		}
		got, err := put(ctx, s, img, image.PutOptions{Name: opt.Name, Progress: opt.Progress, Untrusted: opt.Untrusted})
		if err != nil {
			return out, err
		}
		got.Ref = ref
		out = append(out, got)
	}
	return out, nil
}
