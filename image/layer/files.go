package layer

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandlot/sandlot/errdefs"
)

// File is one regular file of a layer made by Files: an absolute, clean
// path, its mode (permission bits only) and its bytes. It is owned by
// root.
type File struct {
	Path string
	Mode int64
	Body []byte
}

// Files returns a gzip-compressed layer holding files and their parent
// directories (0755, root), every entry with the modification time epoch
// and sorted by name, so the same files always give the same bytes and
// digests: the layers sandlot adds to images it ships (the daemon image,
// a template's pod image) are reproducible. mediaType is the layer's
// (types.OCILayer or types.DockerLayer, matching the image it joins).
func Files(epoch time.Time, mediaType types.MediaType, files ...File) (v1.Layer, error) {
	b, err := filesTar(epoch, files)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(mediaType))
}

func filesTar(epoch time.Time, files []File) ([]byte, error) {
	entries := map[string]*tar.Header{}
	bodies := map[string][]byte{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("layer: file %q: want a clean absolute path: %w", f.Path, errdefs.ErrInvalidArgument)
		}
		if f.Mode&^0o777 != 0 {
			return nil, fmt.Errorf("layer: file %s: mode %o has more than permission bits: %w", f.Path, f.Mode, errdefs.ErrInvalidArgument)
		}
		name := strings.TrimPrefix(f.Path, "/")
		if _, dup := entries[name]; dup {
			return nil, fmt.Errorf("layer: file %s given twice: %w", f.Path, errdefs.ErrInvalidArgument)
		}
		entries[name] = &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: f.Mode, Size: int64(len(f.Body))}
		bodies[name] = f.Body
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if h, ok := entries[dir+"/"]; ok && h.Typeflag == tar.TypeDir {
				break
			}
			entries[dir+"/"] = &tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}
		}
	}
	for name := range entries {
		if strings.HasSuffix(name, "/") {
			if _, clash := entries[strings.TrimSuffix(name, "/")]; clash {
				return nil, fmt.Errorf("layer: %s is both a file and a directory: %w", name, errdefs.ErrInvalidArgument)
			}
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		h := entries[name]
		h.ModTime, h.Format = epoch.UTC(), tar.FormatPAX
		h.Uname, h.Gname = "root", "root"
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(bodies[name]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
