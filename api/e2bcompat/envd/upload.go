package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// upload writes the files of one POST /files all or none: each file is
// streamed to a staging file beside its destination (same directory, so
// the same file system) and the staging files are renamed onto their
// destinations only once every part was read and written. A part that
// fails (its path is a directory, the body breaks off, the sandbox
// refuses a write) removes the staging files: no file of the request is
// written and a file it would replace keeps its content. Each rename is
// atomic; the renames of several files are not one transaction, but they
// come after everything that can fail on the request's side.
type upload struct {
	sb     contexts.Sandbox
	md     map[string]string
	staged []staged
}

// staged is one file written to tmp, to be renamed to target (dest, or
// the file dest's symbolic link names: a write goes through a link, as
// envd's does).
type staged struct{ dest, target, tmp string }

// maxLinks bounds the symbolic links followed from one destination.
const maxLinks = 8

// add streams src to a staging file for dest.
func (u *upload) add(ctx context.Context, dest string, src io.Reader) error {
	target, mode, err := u.target(ctx, dest)
	if err != nil {
		return err
	}
	tmp, err := stagingName(target)
	if err != nil {
		return err
	}
	if _, err := writeStream(ctx, u.sb, tmp, src, u.md, mode); err != nil {
		return err
	}
	u.staged = append(u.staged, staged{dest: dest, target: target, tmp: tmp})
	return nil
}

// target resolves dest: the file it names after its symbolic links, and
// that file's mode when it exists (kept by the replacement, as an
// overwrite in place would). A directory is refused.
func (u *upload) target(ctx context.Context, dest string) (string, uint32, error) {
	p := dest
	for range maxLinks {
		fi, err := u.sb.Stat(ctx, p)
		if errors.Is(err, errdefs.ErrNotFound) {
			return p, 0, nil
		}
		if err != nil {
			return "", 0, err
		}
		switch fi.Type {
		case "dir":
			return "", 0, fmt.Errorf("path %s is a directory: %w", dest, errdefs.ErrInvalidArgument)
		case "symlink":
			if fi.Target == "" {
				return p, 0, nil
			}
			if next := fi.Target; path.IsAbs(next) {
				p = next
			} else {
				p = path.Join(path.Dir(p), next)
			}
			continue
		}
		return p, fi.Mode, nil
	}
	return "", 0, fmt.Errorf("path %s: more than %d symbolic links: %w", dest, maxLinks, errdefs.ErrInvalidArgument)
}

// stagingName is a hidden name beside target, unique to this upload.
func stagingName(target string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	base := path.Base(target)
	if len(base) > 100 { // the name stays within NAME_MAX
		base = base[:100]
	}
	return path.Join(path.Dir(target), "."+base+".upload-"+hex.EncodeToString(b[:])), nil
}

// abort removes the staging files, whatever the request's context says.
func (u *upload) abort(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, s := range u.staged {
		_ = u.sb.Remove(ctx, agent.RemoveParams{Path: s.tmp})
	}
	u.staged = nil
}

// commit renames the staging files onto their targets, in the request's
// order (a path named twice gets its last part), and describes them.
func (u *upload) commit(ctx context.Context) ([]writtenFile, error) {
	out := make([]writtenFile, 0, len(u.staged))
	for i, s := range u.staged {
		fi, err := u.sb.Move(ctx, agent.MoveParams{From: s.tmp, To: s.target})
		if err != nil {
			u.staged = u.staged[i:]
			u.abort(ctx)
			return nil, err
		}
		name := path.Base(s.dest)
		p := fi.Path
		if s.target != s.dest || p == "" {
			p = s.dest // through a link: the path the caller named
		}
		out = append(out, writtenFile{Path: p, Name: name, Type: "file", Metadata: fi.Metadata})
	}
	u.staged = nil
	return out, nil
}
