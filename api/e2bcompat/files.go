package e2bcompat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// maxUpload bounds one POST /files body.
const maxUpload = 256 << 20

// writtenFile is one item of the POST /files answer.
type writtenFile struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// readFile serves GET /files?path=: the bytes as the guard lets them out
// (contexts.ReadFile: bounded chunks by file offset, one redactor for the
// whole file), or a JSON error. A file that fits in one read gets a
// Content-Length; a failure after the first bytes breaks the connection,
// the only way left to tell the client the body is incomplete.
func (h *Handler) readFile(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeAPIError(w, fmt.Errorf("path is required: %w", errdefs.ErrInvalidArgument))
		return
	}
	started := false
	err := h.use(r.Context(), sandboxFrom(r.Context()), func(ctx context.Context, sb contexts.Sandbox) error {
		fi, err := sb.Stat(ctx, p)
		if err != nil {
			return err
		}
		if fi.Type == "dir" {
			return fmt.Errorf("path %s is a directory: %w", p, errdefs.ErrInvalidArgument)
		}
		return contexts.ReadFile(ctx, sb, p, func(c contexts.FileChunk) error {
			if !started {
				started = true
				w.Header().Set("Content-Type", "application/octet-stream")
				if c.EOF {
					w.Header().Set("Content-Length", strconv.Itoa(len(c.Data)))
				}
				w.WriteHeader(http.StatusOK)
			}
			if _, err := w.Write(c.Data); err != nil {
				return errClientGone
			}
			return nil
		})
	})
	switch {
	case err == nil || errors.Is(err, errClientGone):
	case started:
		panic(http.ErrAbortHandler)
	default:
		writeAPIError(w, err)
	}
}

// errClientGone ends a download whose client stopped reading.
var errClientGone = errors.New("client gone")

// writeFiles serves POST /files: multipart (one part "file" per file; the
// part's filename is its path when the path query is absent) or a raw
// application/octet-stream body for the path query.
func (h *Handler) writeFiles(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxUpload)
	qpath := r.URL.Query().Get("path")
	var out []writtenFile
	err := h.use(r.Context(), sandboxFrom(r.Context()), func(ctx context.Context, sb contexts.Sandbox) error {
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct != "multipart/form-data" {
			if qpath == "" {
				return fmt.Errorf("path is required: %w", errdefs.ErrInvalidArgument)
			}
			fi, err := writeStream(ctx, sb, qpath, r.Body)
			if err != nil {
				return err
			}
			out = append(out, writtenFile{Path: fi.Path, Name: fi.Name, Type: "file"})
			return nil
		}
		mr, err := r.MultipartReader()
		if err != nil {
			return fmt.Errorf("multipart body: %w", errdefs.ErrInvalidArgument)
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("multipart body: %w", errdefs.ErrInvalidArgument)
			}
			if part.FormName() != "file" {
				continue
			}
			dest := qpath
			// part.FileName() strips directories; the SDKs put the whole
			// path there.
			if _, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" && (qpath == "" || dest == "") {
				dest = params["filename"]
			}
			if dest == "" {
				return fmt.Errorf("file part without a path: %w", errdefs.ErrInvalidArgument)
			}
			fi, err := writeStream(ctx, sb, dest, part)
			if err != nil {
				return err
			}
			out = append(out, writtenFile{Path: fi.Path, Name: fi.Name, Type: "file"})
		}
		if len(out) == 0 {
			return fmt.Errorf("no file in the request: %w", errdefs.ErrInvalidArgument)
		}
		return nil
	})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = fmt.Errorf("upload larger than %d bytes: %w", maxUpload, errdefs.ErrResourceExhausted)
		}
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeStream writes src to path in agent-sized chunks.
func writeStream(ctx context.Context, sb contexts.Sandbox, path string, src io.Reader) (*agent.FileInfo, error) {
	buf := make([]byte, agent.ChunkSize)
	var fi *agent.FileInfo
	first := true
	for {
		n, rerr := io.ReadFull(src, buf)
		if rerr != nil && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			var mbe *http.MaxBytesError
			if errors.As(rerr, &mbe) {
				return nil, rerr
			}
			return nil, fmt.Errorf("read upload: %w", errdefs.ErrInvalidArgument)
		}
		if n > 0 || first {
			var err error
			fi, err = sb.WriteFile(ctx, agent.WriteParams{Path: path, Data: append([]byte(nil), buf[:n]...), Append: !first})
			if err != nil {
				return nil, err
			}
			first = false
		}
		if rerr != nil {
			break
		}
	}
	if fi.Name == "" {
		fi.Name = path[strings.LastIndex(path, "/")+1:]
	}
	return fi, nil
}
