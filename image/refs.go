package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// Ref is a named reference to an image.
type Ref struct {
	Name    string    `json:"name"`
	Digest  v1.Hash   `json:"digest"`
	Updated time.Time `json:"updated"`
}

// nameRE allows registry references (docker.io/library/debian:bookworm,
// repo@sha256:...), template names and tenant-scoped names (t/acme/app:v1).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,254}$`)

func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("image: name %q: want 1-255 of [A-Za-z0-9._:/@+-], starting with a letter or digit: %w", name, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Tag points name at the stored image digest, replacing what it named.
// Moving a name is the act of whoever owns the store (the operator, the
// daemon naming a built-in's image): every process and tenant the store
// serves reads its names, so a name that came from a tenant (an archive's
// annotations, a reference it pulled) is never given here. TagNew and
// PutOptions.Name set a name only when it is new.
func (s *Store) Tag(ctx context.Context, name string, digest v1.Hash) error {
	return s.tagChecked(ctx, name, digest, true)
}

// TagNew points name at the stored image digest when name is new or
// already names digest; a name of another image stays as it is and the
// call fails with already_exists. The check and the write are one step
// under the refs lock, so of callers racing for a new name one wins.
func (s *Store) TagNew(ctx context.Context, name string, digest v1.Hash) error {
	return s.tagChecked(ctx, name, digest, false)
}

func (s *Store) tagChecked(ctx context.Context, name string, digest v1.Hash, move bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	lease, err := s.Lease(ctx)
	if err != nil {
		return err
	}
	defer lease.Release()
	if _, err := s.image(digest); err != nil {
		return err
	}
	return s.tag(name, digest, move)
}

// tag records name -> digest; unless move, only when name is new or
// names digest already (already_exists otherwise). Precondition: the
// caller holds a lease and the image is complete.
func (s *Store) tag(name string, digest v1.Hash, move bool) error {
	return s.updateRefs(func(refs map[string]Ref) error {
		if old, ok := refs[name]; ok && !move {
			if old.Digest == digest {
				return nil
			}
			return fmt.Errorf("image: name %q names another image: %w", name, errdefs.ErrAlreadyExists)
		}
		refs[name] = Ref{Name: name, Digest: digest, Updated: time.Now().UTC()}
		return nil
	})
}

// Untag removes name. The image's content stays until GC.
func (s *Store) Untag(ctx context.Context, name string) error {
	return s.updateRefs(func(refs map[string]Ref) error {
		if _, ok := refs[name]; !ok {
			return fmt.Errorf("image: %q: %w", name, errdefs.ErrNotFound)
		}
		delete(refs, name)
		return nil
	})
}

// Resolve returns the digest name points at.
func (s *Store) Resolve(ctx context.Context, name string) (v1.Hash, error) {
	refs, err := s.readRefs()
	if err != nil {
		return v1.Hash{}, err
	}
	r, ok := refs[name]
	if !ok {
		return v1.Hash{}, fmt.Errorf("image: %q: %w", name, errdefs.ErrNotFound)
	}
	return r.Digest, nil
}

// Refs lists every name, sorted.
func (s *Store) Refs(ctx context.Context) ([]Ref, error) {
	refs, err := s.readRefs()
	if err != nil {
		return nil, err
	}
	out := make([]Ref, 0, len(refs))
	for _, r := range refs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Store) refsPath() string { return filepath.Join(s.root, "refs.json") }

func (s *Store) readRefs() (map[string]Ref, error) {
	b, err := os.ReadFile(s.refsPath())
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Ref{}, nil
	}
	if err != nil {
		return nil, err
	}
	refs := map[string]Ref{}
	if err := json.Unmarshal(b, &refs); err != nil {
		return nil, fmt.Errorf("image: %s: %w", s.refsPath(), err)
	}
	return refs, nil
}

// updateRefs applies fn to refs.json under an exclusive lock (in-process
// mutex plus a flock for other processes) and replaces the file atomically.
func (s *Store) updateRefs(fn func(map[string]Ref) error) error {
	s.refMu.Lock()
	defer s.refMu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.root, "refs.lock"), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	refs, err := s.readRefs()
	if err != nil {
		return err
	}
	if err := fn(refs); err != nil {
		return err
	}
	return writeJSON(s.refsPath(), refs)
}
