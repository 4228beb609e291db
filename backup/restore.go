package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/datadir"
	"github.com/sandlot/sandlot/store"
)

// RestoreConfig says which archive to bring back where.
type RestoreConfig struct {
	// From is the archive.
	From string
	// DataDir is the target. It must be empty or absent unless Force,
	// which replaces the state files the archive holds (stop the daemon
	// on it first).
	DataDir string
	Force   bool
	// MaxBytes bounds the database and the templates' images (0: 64 GiB).
	MaxBytes int64
	// ImagesDir is where templates.tar's images go ("": DataDir/images).
	ImagesDir string
}

// Restore checks the archive at cfg.From and brings its state back into
// cfg.DataDir. Nothing in the target changes unless every member is what
// the manifest says and the database's schema is one this sandlot knows.
func Restore(ctx context.Context, cfg RestoreConfig) (Manifest, error) {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 64 << 30
	}
	if err := checkTarget(cfg.DataDir, cfg.Force); err != nil {
		return Manifest{}, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	f, err := os.Open(cfg.From)
	if err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	stage, err := os.MkdirTemp(cfg.DataDir, ".restore-")
	if err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(stage)
	m, err := extract(f, stage, cfg.MaxBytes)
	if err != nil {
		return m, err
	}
	// The manifest's word first (a clear message), then the database's own.
	if latest := store.SchemaVersion(); m.Schema > latest {
		return m, fmt.Errorf("restore: the archive's database is at schema %d, newer than this sandlot's %d (made by sandlot %s): restore it with that release or a later one: %w",
			m.Schema, latest, m.Sandlot, errdefs.ErrFailedPrecondition)
	}
	sc, err := store.InspectSchema(ctx, filepath.Join(stage, DatabaseName))
	if err != nil {
		return m, fmt.Errorf("restore: the archive's database: %w", err)
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("restore: the archive comes from a newer sandlot: %w", err)
	}
	// The images first: a template that does not come back stops the
	// restore before the data dir changes (blobs imported meanwhile are
	// the image store's, for its GC).
	if hasFile(m, TemplatesName) {
		imagesDir := cfg.ImagesDir
		if imagesDir == "" {
			imagesDir = filepath.Join(cfg.DataDir, datadir.Images)
		}
		if err := importTemplates(ctx, filepath.Join(stage, TemplatesName), imagesDir, m.Templates); err != nil {
			return m, err
		}
	}
	if err := place(stage, cfg.DataDir, m); err != nil {
		return m, err
	}
	return m, nil
}

func hasFile(m Manifest, name string) bool {
	for _, f := range m.Files {
		if f.Name == name {
			return true
		}
	}
	return false
}

// checkTarget refuses a data dir that holds anything, unless force.
func checkTarget(dir string, force bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if len(ents) > 0 && !force {
		return fmt.Errorf("restore: %s is not empty (it holds %s…); restore into an empty dir, or stop its daemon and pass --force to replace its state: %w",
			dir, ents[0].Name(), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// extract reads the archive into stage and returns its manifest.
func extract(r io.Reader, stage string, maxBytes int64) (Manifest, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return Manifest{}, fmt.Errorf("restore: not a sandlot backup (%v): %w", err, errdefs.ErrInvalidArgument)
	}
	tr := tar.NewReader(zr)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != ManifestName {
		return Manifest{}, fmt.Errorf("restore: not a sandlot backup (no %s first): %w", ManifestName, errdefs.ErrInvalidArgument)
	}
	mb, err := io.ReadAll(io.LimitReader(tr, manifestMax+1))
	if err != nil || len(mb) > manifestMax {
		return Manifest{}, fmt.Errorf("restore: manifest unreadable or too large: %w", errdefs.ErrInvalidArgument)
	}
	m, err := parseManifest(mb, maxBytes)
	if err != nil {
		return m, err
	}
	want := map[string]File{}
	for _, f := range m.Files {
		want[f.Name] = f
	}
	root, err := os.OpenRoot(stage)
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	defer root.Close()
	seen := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return m, fmt.Errorf("restore: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		if err := extractMember(root, tr, hdr, want, seen); err != nil {
			return m, err
		}
	}
	for _, f := range m.Files {
		if !seen[f.Name] {
			return m, fmt.Errorf("restore: %s is in the manifest but not in the archive: %w", f.Name, errdefs.ErrInvalidArgument)
		}
	}
	return m, nil
}

// extractMember writes one member into root, after checking that the
// manifest names it (so it is a flat name of a data dir's file), that it
// is a regular file seen once, of the manifest's size; its bytes must
// match the manifest's checksum. root (os.Root) would stop any path that
// got past those checks from leaving the stage.
func extractMember(root *os.Root, tr io.Reader, hdr *tar.Header, want map[string]File, seen map[string]bool) error {
	f, ok := want[hdr.Name]
	switch {
	case !ok:
		return fmt.Errorf("restore: member %q is not in the manifest: %w", hdr.Name, errdefs.ErrInvalidArgument)
	case hdr.Typeflag != tar.TypeReg:
		return fmt.Errorf("restore: member %q is not a regular file: %w", hdr.Name, errdefs.ErrInvalidArgument)
	case seen[hdr.Name]:
		return fmt.Errorf("restore: member %q appears twice: %w", hdr.Name, errdefs.ErrInvalidArgument)
	case hdr.Size != f.Size:
		return fmt.Errorf("restore: member %q is %d bytes, the manifest says %d: %w", hdr.Name, hdr.Size, f.Size, errdefs.ErrInvalidArgument)
	}
	seen[hdr.Name] = true
	if dir := path.Dir(hdr.Name); dir != "." {
		if err := root.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("restore: %w", err)
		}
	}
	out, err := root.OpenFile(hdr.Name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	h := sha256.New()
	_, err = io.CopyN(io.MultiWriter(out, h), tr, f.Size)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore: %s: %w", hdr.Name, err)
	}
	if hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("restore: %s does not match its checksum (a damaged or altered archive): %w", hdr.Name, errdefs.ErrInvalidArgument)
	}
	return nil
}

// place moves the staged files into dir, replacing what is there; a
// replaced database loses its old -wal and -shm first, which would
// otherwise be applied to the restored one.
func place(stage, dir string, m Manifest) error {
	for _, f := range m.Files {
		if f.Name == TemplatesName {
			continue // imported into the image store, not a file of the data dir
		}
		if f.Name == DatabaseName {
			for _, ext := range []string{"-wal", "-shm"} {
				if err := os.Remove(filepath.Join(dir, DatabaseName+ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("restore: %w", err)
				}
			}
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f.Name)), 0o700); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if err := os.Rename(filepath.Join(stage, f.Name), filepath.Join(dir, f.Name)); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return nil
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
