// Package image is sandlot's content-addressed image store: blobs by digest,
// layers unpacked once into read-only directories shared by every sandbox
// (overlayfs lowerdirs), image manifests and configs, named references and
// garbage collection. Images come in through Put as go-containerregistry
// v1.Images (see image/source for registries and tarballs, image/build for
// recipes, image/debian for the Debian base).
//
// On disk (docs/images.md has the full picture):
//
//	<root>/lock                    flock: shared by writers (leases), exclusive by GC
//	<root>/blobs/sha256/<hex>      manifests, configs, compressed layer blobs (0444)
//	<root>/layers/sha256/<diffid>/ one unpacked layer: root/ (the tree), layer.json
//	<root>/refs.json               name -> manifest digest
//	<root>/tmp/                    staging; emptied by GC
//
// Concurrency: a Store is safe for concurrent use, and several processes may
// share one root. Writers hold a lease (a shared flock) for as long as they
// need unreferenced content to survive; GC takes the lock exclusively, so it
// never sweeps what a pull or build is still writing. Blobs and layers are
// staged in tmp/ and renamed into place, so a reader never sees half of one
// and two writers of the same content both succeed.
package image

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/layer"
)

// Config configures a Store. Zero values are documented per field.
type Config struct {
	// Limits bound each unpacked layer; see layer.Limits.
	Limits layer.Limits
	// MaxBlobBytes bounds one compressed layer blob; 0: 8 GiB.
	MaxBlobBytes int64
	// Logger; nil discards.
	Logger *slog.Logger
}

// Store is an image store rooted at one directory.
type Store struct {
	root string
	cfg  Config
	log  *slog.Logger

	// mu guards flights: at most one unpack of a layer per process.
	mu      sync.Mutex
	flights map[v1.Hash]*flight

	refMu sync.Mutex // serializes refs.json updates within the process
}

type flight struct {
	done chan struct{}
	err  error
}

// maxMetaBytes bounds manifests and configs, which are read into memory.
const maxMetaBytes = 4 << 20

// Open opens (creating if needed) the store at root. root is made 0700:
// layer trees keep the image's owners and modes, and no host user may
// reach them.
func Open(root string, cfg Config) (*Store, error) {
	if cfg.MaxBlobBytes <= 0 {
		cfg.MaxBlobBytes = 8 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{"", "blobs/sha256", "layers/sha256", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			return nil, fmt.Errorf("image: open store: %w", err)
		}
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("image: open store: %w", err)
	}
	return &Store{root: root, cfg: cfg, log: cfg.Logger, flights: map[v1.Hash]*flight{}}, nil
}

// Root returns the store's directory.
func (s *Store) Root() string { return s.root }

func (s *Store) blobPath(h v1.Hash) string {
	return filepath.Join(s.root, "blobs", h.Algorithm, h.Hex)
}

func (s *Store) layerPath(diffID v1.Hash) string {
	return filepath.Join(s.root, "layers", diffID.Algorithm, diffID.Hex)
}

// LayerDir returns the unpacked tree of the layer with this diff ID: the
// directory to give overlayfs as a lowerdir. Never write to it.
func (s *Store) LayerDir(diffID v1.Hash) string {
	return filepath.Join(s.layerPath(diffID), "root")
}

// HasLayer reports whether the layer with this diff ID is unpacked.
func (s *Store) HasLayer(diffID v1.Hash) bool {
	_, err := os.Stat(filepath.Join(s.layerPath(diffID), "layer.json"))
	return err == nil
}

// HasBlob reports whether the blob is stored.
func (s *Store) HasBlob(h v1.Hash) bool {
	_, err := os.Stat(s.blobPath(h))
	return err == nil
}

// Blob opens a stored blob.
func (s *Store) Blob(h v1.Hash) (*os.File, error) {
	if err := checkHash(h); err != nil {
		return nil, err
	}
	f, err := os.Open(s.blobPath(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("image: blob %s: %w", h, errdefs.ErrNotFound)
	}
	return f, err
}

func (s *Store) readMeta(h v1.Hash) ([]byte, error) {
	f, err := s.Blob(h)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetaBytes {
		return nil, fmt.Errorf("image: blob %s over %d bytes: %w", h, maxMetaBytes, errdefs.ErrInvalidArgument)
	}
	return b, nil
}

func checkHash(h v1.Hash) error {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return fmt.Errorf("image: digest %q: only sha256 is supported: %w", h, errdefs.ErrInvalidArgument)
	}
	if _, err := hex.DecodeString(h.Hex); err != nil {
		return fmt.Errorf("image: digest %q: %w", h, errdefs.ErrInvalidArgument)
	}
	return nil
}

// tempDir makes a staging directory under tmp/.
func (s *Store) tempDir(prefix string) (string, error) {
	return os.MkdirTemp(filepath.Join(s.root, "tmp"), prefix)
}

// writeBlob stores r as the blob h, verifying its digest and size bound.
// It is a no-op when the blob is already stored (r is not read).
func (s *Store) writeBlob(r io.Reader, h v1.Hash, max int64) error {
	if err := checkHash(h); err != nil {
		return err
	}
	if s.HasBlob(h) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "blob-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	hw := v1Hasher()
	n, err := io.Copy(io.MultiWriter(f, hw), io.LimitReader(r, max+1))
	if err != nil {
		return fmt.Errorf("image: write blob %s: %w", h, err)
	}
	if n > max {
		return fmt.Errorf("image: blob %s over %d bytes: %w", h, max, errdefs.ErrResourceExhausted)
	}
	if got := hw.sum(); got != h {
		return fmt.Errorf("image: blob digest %s, want %s: %w", got, h, errdefs.ErrInvalidArgument)
	}
	if err := f.Chmod(0o444); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Rename(f.Name(), s.blobPath(h))
}

// writeBytes stores b as a blob and returns its digest.
func (s *Store) writeBytes(b []byte) (v1.Hash, error) {
	h, _, err := v1.SHA256(bytesReader(b))
	if err != nil {
		return v1.Hash{}, err
	}
	return h, s.writeBlob(bytesReader(b), h, int64(len(b)))
}

// Lease keeps unreferenced content from garbage collection until Release.
// Hold one across a sequence that writes content and then names it (Put
// then Tag, a multi-step build).
type Lease struct{ f *os.File }

// Lease takes a lease; it waits while a GC runs.
func (s *Store) Lease(ctx context.Context) (*Lease, error) {
	f, err := s.lockFile(ctx, unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	return &Lease{f: f}, nil
}

// Release ends the lease. It is safe to call more than once.
func (l *Lease) Release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the description drops the flock
		l.f = nil
	}
}

// lockFile opens the store lock and takes how (LOCK_SH or LOCK_EX) on a
// description of its own, polling so that ctx can end the wait: flock on
// separate descriptions excludes even within one process.
func (s *Store) lockFile(ctx context.Context, how int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(s.root, "lock"), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("image: store busy: %w: %w", ctx.Err(), errdefs.ErrUnavailable)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// randomName returns a short random hex string for staging names.
func randomName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// layerRecord is layer.json: what a layer directory holds and how it was made.
type layerRecord struct {
	DiffID   v1.Hash     `json:"diffID"`
	Blob     v1.Hash     `json:"blob"`
	Unpacked time.Time   `json:"unpacked"`
	Stats    layer.Stats `json:"stats"`
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp-" + randomName()
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
