package envd

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// writtenFile is one item of the POST /files answer.
type writtenFile struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// readFile serves GET /files?path=: the bytes as the guard lets them out
// (contexts.ReadFile: bounded chunks by file offset, one redactor for the
// whole file), or a JSON error. A file that fits in one read gets a
// Content-Length; a failure after the first bytes breaks the connection,
// the only way left to tell the client the body is incomplete.
func (h *Handler) readFile(w http.ResponseWriter, r *http.Request) {
	r, ok := fileUser(w, r)
	if !ok {
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		core.WriteAPIError(w, fmt.Errorf("path is required: %w", errdefs.ErrInvalidArgument))
		return
	}
	started := false
	err := h.edge.Use(r.Context(), core.RefFrom(r.Context()), func(ctx context.Context, sb contexts.Sandbox) error {
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
		core.WriteAPIError(w, err)
	}
}

// errClientGone ends a download whose client stopped reading.
var errClientGone = errors.New("client gone")

// writeFiles serves POST /files: multipart (one part "file" per file; the
// part's filename is its path when the path query is absent) or a raw
// application/octet-stream body for the path query.
//
// A gzip body (Content-Encoding: gzip, as the SDKs send `gzip: true`) is
// inflated as it is written, within the same bound as a plain body:
// inflating stops at Config.MaxUploadBytes, so a bomb costs the daemon one
// chunk of memory and the sandbox no more disk than a plain upload could.
func (h *Handler) writeFiles(w http.ResponseWriter, r *http.Request) {
	r, ok := fileUser(w, r)
	if !ok {
		return
	}
	md, err := uploadMetadata(r.Header)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	limit := h.cfg.MaxUploadBytes
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	qpath := r.URL.Query().Get("path")
	var out []writtenFile
	err = h.edge.Use(r.Context(), core.RefFrom(r.Context()), func(ctx context.Context, sb contexts.Sandbox) error {
		body, err := decodedBody(r, limit)
		if err != nil {
			return err
		}
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct != "multipart/form-data" {
			if qpath == "" {
				return fmt.Errorf("path is required: %w", errdefs.ErrInvalidArgument)
			}
			fi, err := writeStream(ctx, sb, qpath, body, md)
			if err != nil {
				return err
			}
			out = append(out, writtenFile{Path: fi.Path, Name: fi.Name, Type: "file", Metadata: fi.Metadata})
			return nil
		}
		_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if params["boundary"] == "" {
			return fmt.Errorf("multipart body without a boundary: %w", errdefs.ErrInvalidArgument)
		}
		mr := multipart.NewReader(body, params["boundary"])
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
			fi, err := writeStream(ctx, sb, dest, part, md)
			if err != nil {
				return err
			}
			out = append(out, writtenFile{Path: fi.Path, Name: fi.Name, Type: "file", Metadata: fi.Metadata})
		}
		if len(out) == 0 {
			return fmt.Errorf("no file in the request: %w", errdefs.ErrInvalidArgument)
		}
		return nil
	})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || errors.Is(err, errInflatedUpload) {
			err = fmt.Errorf("upload larger than %d bytes (after decompression): %w", limit, errdefs.ErrResourceExhausted)
		}
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, out)
}

// sourceErr keeps the error its reader returned other than io.EOF.
type sourceErr struct {
	r   io.Reader
	err error
}

func (s *sourceErr) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// errInflatedUpload ends a gzip upload that inflates past the bound.
var errInflatedUpload = errors.New("decompressed upload is too large")

// decodedBody is r's body, inflated when its Content-Encoding is gzip.
func decodedBody(r *http.Request, limit int64) (io.Reader, error) {
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return r.Body, nil
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		return &boundedGzip{zr: zr, limit: limit + 1, err: errInflatedUpload}, nil
	default:
		return nil, fmt.Errorf("Content-Encoding %s is not supported; send gzip or identity: %w", enc, errdefs.ErrInvalidArgument)
	}
}

// writeStream writes src to path in agent-sized chunks. An upload that
// fails part way is removed: a truncated file is worse than none.
// md is the file's metadata, set with its first chunk.
func writeStream(ctx context.Context, sb contexts.Sandbox, path string, src io.Reader, md map[string]string) (*agent.FileInfo, error) {
	buf := make([]byte, agent.ChunkSize)
	var fi *agent.FileInfo
	first := true
	rec := &sourceErr{r: src}
	for {
		n, rerr := io.ReadFull(rec, buf)
		// io.ReadFull says ErrUnexpectedEOF for a short last chunk too;
		// only the source's own error says the body ended inside its
		// part (multipart) or before its length (a cut connection).
		if errors.Is(rerr, io.ErrUnexpectedEOF) && rec.err != nil {
			rerr = errors.New("the request body ended before the file did")
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			if !first {
				_ = sb.Remove(context.WithoutCancel(ctx), agent.RemoveParams{Path: path})
			}
			var mbe *http.MaxBytesError
			if errors.As(rerr, &mbe) || errors.Is(rerr, errInflatedUpload) {
				return nil, rerr
			}
			return nil, fmt.Errorf("read upload: %v: %w", rerr, errdefs.ErrInvalidArgument)
		}
		if n > 0 || first {
			var err error
			p := agent.WriteParams{Path: path, Data: append([]byte(nil), buf[:n]...), Append: !first}
			if first {
				p.Metadata = md
			}
			fi, err = sb.WriteFile(ctx, p)
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

// metadataHeader prefixes the request headers that carry a file's
// metadata on upload (envd 0.6.2): X-Metadata-<key>: <value>.
const metadataHeader = "X-Metadata-"

// uploadMetadata reads the metadata of an upload from its headers. Header
// names are case-insensitive, so keys are lowercased (the SDKs' keys are
// HTTP tokens); at most 64 keys, values printable ASCII of at most 4 KiB.
func uploadMetadata(h http.Header) (map[string]string, error) {
	var md map[string]string
	for name, vals := range h {
		if len(name) <= len(metadataHeader) || !strings.EqualFold(name[:len(metadataHeader)], metadataHeader) {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		v := vals[0]
		if len(v) > 4096 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			return nil, fmt.Errorf("metadata %s: values must be printable ASCII of at most 4096 bytes: %w", name, errdefs.ErrInvalidArgument)
		}
		md[strings.ToLower(name[len(metadataHeader):])] = v
	}
	if len(md) > 64 {
		return nil, fmt.Errorf("%d metadata headers, at most 64: %w", len(md), errdefs.ErrInvalidArgument)
	}
	return md, nil
}
