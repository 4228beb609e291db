package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
)

// Sandbox roots a file route may touch. Relative paths resolve against
// HomeDir, like the agent's.
const (
	HomeDir = "/home/user"
	TmpDir  = "/tmp"
)

// sandboxPath cleans p and keeps it inside HomeDir or TmpDir, so "..",
// doubled slashes and absolute paths elsewhere are a 400 before anything
// reaches the sandbox.
func sandboxPath(p string, allowEmpty bool) (string, error) {
	if p == "" {
		if allowEmpty {
			return HomeDir, nil
		}
		return "", invalid("the path query parameter is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", invalid("path contains a NUL byte")
	}
	if !strings.HasPrefix(p, "/") {
		p = HomeDir + "/" + p
	}
	c := path.Clean(p)
	for _, root := range []string{HomeDir, TmpDir} {
		if c == root || strings.HasPrefix(c, root+"/") {
			return c, nil
		}
	}
	return "", invalid("path %q is outside %s and %s", c, HomeDir, TmpDir)
}

// withSandbox runs fn on the sandbox a file route addresses: by context id
// (/v1/contexts/{id}/...; the context must be active) or by conversation
// and path (/v1/conversations/{c}/paths/{p}/...; created when absent, like
// a tool call).
func (s *Server) withSandbox(r *http.Request, fn func(ctx context.Context, sb contexts.Sandbox) error) error {
	t := mustTenant(r)
	ctxID := r.PathValue("id")
	if ctxID == "" {
		id := contexts.Identity{TenantID: t.ID, ConversationID: r.PathValue("conversationId"), PathID: r.PathValue("pathId")}
		if err := checkID("conversationId", id.ConversationID); err != nil {
			return err
		}
		if err := checkID("pathId", id.PathID); err != nil {
			return err
		}
		return s.cfg.Contexts.Use(r.Context(), id, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			return fn(ctx, sb)
		})
	}
	rec, err := s.cfg.Contexts.Get(r.Context(), t.ID, ctxID)
	if err != nil {
		return err
	}
	if !rec.State.Active() {
		return fmt.Errorf("context %s is %s: %w", ctxID, rec.State, errdefs.ErrFailedPrecondition)
	}
	return s.cfg.Contexts.Use(r.Context(), rec.Identity, func(ctx context.Context, cur *contexts.Record, sb contexts.Sandbox) error {
		// The context ended between Get and Use and Use made a new one
		// for the identity: that is not the context the caller named.
		if cur.ID != ctxID {
			return fmt.Errorf("context %s has ended: %w", ctxID, errdefs.ErrFailedPrecondition)
		}
		return fn(ctx, sb)
	})
}

// upload streams the body into the sandbox in ChunkSize writes at
// increasing offsets, so memory stays bounded whatever the file size.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	p, err := sandboxPath(r.URL.Query().Get("path"), false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.ContentLength > s.cfg.MaxUploadBytes {
		s.writeError(w, r, &http.MaxBytesError{Limit: s.cfg.MaxUploadBytes})
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	var info *agent.FileInfo
	err = s.withSandbox(r, func(ctx context.Context, sb contexts.Sandbox) error {
		buf := make([]byte, agent.ChunkSize)
		var off int64
		for {
			n, rerr := io.ReadFull(body, buf)
			if n > 0 || off == 0 {
				fi, err := sb.WriteFile(ctx, agent.WriteParams{Path: p, Data: buf[:n], Offset: off})
				if err != nil {
					return err
				}
				info = fi
				off += int64(n)
			}
			switch {
			case rerr == nil:
			case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
				return nil
			default:
				// Leave no half-written file behind a failed upload.
				_ = sb.Remove(context.WithoutCancel(ctx), agent.RemoveParams{Path: p})
				var tooBig *http.MaxBytesError
				if errors.As(rerr, &tooBig) {
					return rerr
				}
				return fmt.Errorf("reading the upload body: %v: %w", rerr, errdefs.ErrInvalidArgument)
			}
		}
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// errAbort marks a download that failed after its first bytes were sent.
var errAbort = errors.New("download aborted")

// download streams a file out in ChunkSize reads. The bytes pass the
// context's guard, which may change their length, so there is no
// Content-Length; X-File-Size carries the size in the sandbox, for progress.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	p, err := sandboxPath(r.URL.Query().Get("path"), false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenantID := mustTenant(r).ID
	started := false
	err = s.withSandbox(r, func(ctx context.Context, sb contexts.Sandbox) error {
		fg := newFileGuard(ctx, s.cfg.Guard, tenantID)
		write := func(b []byte) error {
			if len(b) == 0 {
				return nil
			}
			if _, err := w.Write(b); err != nil {
				return fmt.Errorf("%w: %v", errAbort, err)
			}
			return nil
		}
		var off int64
		for {
			res, err := sb.ReadFile(fg.readCtx, agent.ReadParams{Path: p, Offset: off, Limit: agent.ChunkSize})
			if err != nil {
				err = fg.err(err)
				if started {
					return fmt.Errorf("%w: %v", errAbort, err)
				}
				return err
			}
			if !started {
				started = true
				h := w.Header()
				h.Set("Content-Type", "application/octet-stream")
				h.Set("X-File-Size", strconv.FormatInt(res.Size, 10))
				h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
				w.WriteHeader(http.StatusOK)
			}
			off += int64(len(res.Data))
			if err := write(fg.write(res.Data)); err != nil {
				return err
			}
			if res.EOF || len(res.Data) == 0 {
				return write(fg.flush())
			}
		}
	})
	if err != nil {
		if started {
			// The status line is gone; breaking the connection is the
			// only way to tell the client the body is incomplete.
			panic(http.ErrAbortHandler)
		}
		s.writeError(w, r, err)
	}
}

// fileGuard redacts a chunked file read as one stream. With a guard, the
// chunks are read raw (guard mode off on readCtx: the guarded sandbox
// passes them unchanged) and text goes through one StreamRedactor, which
// holds back a tail so a secret straddling two chunks is still caught.
// Binary data (a NUL byte or invalid UTF-8) passes as it does through the
// guarded sandbox. Without a guard, the guarded sandbox redacts each
// chunk on its own and fileGuard passes them through.
type fileGuard struct {
	ctx, readCtx context.Context
	g            contexts.Guard
	tenant       string
	red          contexts.StreamRedactor
	carry        []byte // an incomplete UTF-8 character at a chunk's end
	binary       bool
}

func newFileGuard(ctx context.Context, g contexts.Guard, tenantID string) *fileGuard {
	fg := &fileGuard{ctx: ctx, readCtx: ctx, g: g, tenant: tenantID}
	if g != nil {
		fg.readCtx = guard.WithMode(ctx, guard.ModeOff)
		fg.red = g.Stream(ctx, tenantID)
	}
	return fg
}

// write returns what may be sent for the next chunk.
func (f *fileGuard) write(b []byte) []byte {
	if f.g == nil || f.binary {
		return b
	}
	data := append(f.carry, b...)
	f.carry = nil
	// Keep an incomplete trailing character for the next chunk.
	for i := len(data) - 1; i >= 0 && i >= len(data)-3; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				f.carry = append([]byte(nil), data[i:]...)
				data = data[:i]
			}
			break
		}
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		// Binary from here on: emit what the redactor holds, then the
		// raw bytes.
		f.binary = true
		out := []byte(f.red.Flush())
		out = append(out, data...)
		out = append(out, f.carry...)
		f.carry = nil
		return out
	}
	return []byte(f.red.Write(string(data)))
}

// flush returns the rest at the end of the file.
func (f *fileGuard) flush() []byte {
	if f.g == nil || f.binary {
		return nil
	}
	out := []byte(f.red.Flush())
	return append(out, f.carry...)
}

// err redacts a read error that passed the sandbox's guard in mode off.
func (f *fileGuard) err(err error) error {
	if f.g == nil {
		return err
	}
	return &redactedError{msg: f.g.Text(f.ctx, f.tenant, err.Error()), err: err}
}

// redactedError is err with a redacted message; errors.Is still sees its
// category.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := sandboxPath(q.Get("path"), true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	depth := 1
	if v := q.Get("depth"); v != "" {
		depth, err = strconv.Atoi(v)
		if err != nil || depth < 1 || depth > 10 {
			s.writeError(w, r, invalid("depth must be an integer from 1 to 10"))
			return
		}
	}
	var entries []agent.FileInfo
	err = s.withSandbox(r, func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		entries, err = sb.List(ctx, agent.ListParams{Path: p, Depth: depth})
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if entries == nil {
		entries = []agent.FileInfo{}
	}
	writeJSON(w, http.StatusOK, api.FileList{Path: p, Entries: entries})
}
