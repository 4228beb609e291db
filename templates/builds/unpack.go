package builds

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/layer"
)

// Unpack writes a tar (gzip-compressed or not: told by its magic bytes)
// into b's context directory. The tar is hostile input: every entry is
// checked (layer.Limits.Check) before layer.Apply writes it, which keeps
// what it writes inside the directory whatever the names and links say:
//   - names with a ".." component or absolute names are refused, not
//     clamped (a context never needs them; refusing says what is wrong);
//   - character and block devices, and overlay whiteout names (".wh."),
//     are refused; symlinks are kept as they are, whatever they point at
//     (COPY copies a symlink as a symlink and reads the context through
//     os.Root, so a link out of it is never followed on the host);
//   - the bytes of regular files and the number of entries are bounded
//     (Config.MaxUploadBytes, MaxEntries: Apply's limits), so a small gzip
//     that inflates to a lot stops at the bound (resource_exhausted), as
//     does a body past its reader's http.MaxBytesReader.
//
// A malformed tar or gzip is invalid_argument. After an error the
// directory may hold part of the upload; it is removed with the build.
func (q *Queue) Unpack(ctx context.Context, b *Build, r io.Reader) error {
	if b.Started() {
		return fmt.Errorf("build %s already started: %w", b.ID, errdefs.ErrFailedPrecondition)
	}
	br := bufio.NewReader(r)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return readErr(err)
		}
		in = zr
	}
	src := &sourceReader{r: in}
	_, err := layer.Apply(ctx, b.Dir, src, layer.Limits{MaxBytes: q.cfg.MaxUploadBytes, MaxEntries: q.cfg.MaxEntries, Check: checkEntry})
	if src.err != nil {
		return readErr(src.err) // the body's bound, a broken gzip: said better than Apply's "read tar"
	}
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	return nil
}

// sourceReader keeps the first error reading the upload other than its
// end.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// checkEntry refuses the names and types a build context may not hold.
func checkEntry(hdr *tar.Header) error {
	bad := func(why string) error {
		return fmt.Errorf("build context: entry %q: %s: %w", hdr.Name, why, errdefs.ErrInvalidArgument)
	}
	for _, name := range []string{hdr.Name, hdrLink(hdr)} {
		if name == "" {
			continue
		}
		if path.IsAbs(name) {
			return bad("an absolute path")
		}
		for _, c := range strings.Split(name, "/") {
			if c == ".." {
				return bad(`a ".." component`)
			}
			if strings.HasPrefix(c, ".wh.") {
				return bad("an overlay whiteout name")
			}
		}
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeChar, tar.TypeBlock:
		return bad("a device node")
	case tar.TypeFifo:
		return bad("a FIFO")
	default:
		return bad(fmt.Sprintf("entry type %q", hdr.Typeflag))
	}
	return nil
}

// hdrLink is the name a hardlink points at (checked like a name); a
// symlink's target is content, kept as written.
func hdrLink(hdr *tar.Header) string {
	if hdr.Typeflag == tar.TypeLink {
		return hdr.Linkname
	}
	return ""
}

// readErr is the error of reading the upload: its body bound, or a
// malformed tar or gzip.
func readErr(err error) error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return fmt.Errorf("build context: the upload is over %d bytes: %w: %w", mb.Limit, err, errdefs.ErrResourceExhausted)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// err stays wrapped: a server tells its body deadline by it.
	return fmt.Errorf("build context: not a valid tar (or gzip of one): %w: %w", err, errdefs.ErrInvalidArgument)
}
