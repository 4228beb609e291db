package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
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
	return s.withContext(r, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error { return fn(ctx, sb) })
}

// withContext is withSandbox, handing fn the context's record too.
func (s *Server) withContext(r *http.Request, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error {
	t := mustTenant(r)
	ctxID := r.PathValue("id")
	if ctxID == "" {
		user, err := userParam(r)
		if err != nil {
			return err
		}
		id := contexts.Identity{TenantID: t.ID, UserID: user, ConversationID: r.PathValue("conversationId"), PathID: r.PathValue("pathId")}
		if err := checkID("conversationId", id.ConversationID); err != nil {
			return err
		}
		if err := checkID("pathId", id.PathID); err != nil {
			return err
		}
		return s.cfg.Contexts.Use(r.Context(), id, contexts.CreateOptions{}, fn)
	}
	rec, err := s.cfg.Contexts.Get(r.Context(), t.ID, ctxID)
	if err != nil {
		return err
	}
	if !rec.State.Active() {
		return fmt.Errorf("context %s is %s: %w", ctxID, rec.State, errdefs.ErrFailedPrecondition)
	}
	return s.cfg.Contexts.Use(r.Context(), rec.Identity, contexts.CreateOptions{}, func(ctx context.Context, cur *contexts.Record, sb contexts.Sandbox) error {
		// The context ended between Get and Use and Use made a new one
		// for the identity: that is not the context the caller named.
		if cur.ID != ctxID {
			return fmt.Errorf("context %s has ended: %w", ctxID, errdefs.ErrFailedPrecondition)
		}
		return fn(ctx, cur, sb)
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
	writeJSON(w, http.StatusOK, api.FileInfo(*info))
}

// errAbort marks a download that failed after its first bytes were sent.
var errAbort = errors.New("download aborted")

// download streams a file out through contexts.ReadFile (bounded chunks,
// one guard redactor for the whole file). Redaction may change the length
// of text, so there is no Content-Length; X-File-Size carries the size in
// the sandbox, for progress.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	p, err := sandboxPath(r.URL.Query().Get("path"), false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	started := false
	err = s.withSandbox(r, func(ctx context.Context, sb contexts.Sandbox) error {
		return contexts.ReadFile(ctx, sb, p, func(c contexts.FileChunk) error {
			if !started {
				started = true
				h := w.Header()
				h.Set("Content-Type", "application/octet-stream")
				h.Set("X-File-Size", strconv.FormatInt(c.Size, 10))
				h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
				w.WriteHeader(http.StatusOK)
			}
			if len(c.Data) == 0 {
				return nil
			}
			if _, err := w.Write(c.Data); err != nil {
				return fmt.Errorf("%w: %v", errAbort, err)
			}
			return nil
		})
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
	writeJSON(w, http.StatusOK, api.FileList{Path: p, Entries: fileInfosOf(entries)})
}
