package e2bcompat

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire/filesystem/filesystemconnect"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
	"github.com/sandlot/sandlot/errdefs"
)

func (h *Handler) envdMux() http.Handler {
	mux := http.NewServeMux()
	// Every Connect message is bounded before and after decompression, and
	// the whole body before it is read: a small gzip body must not expand
	// into the daemon's memory.
	limit := h.cfg.MaxMessageBytes
	opts := connect.WithHandlerOptions(
		connect.WithReadMaxBytes(int(limit)),
		connect.WithInterceptors(userInterceptor{}),
		connect.WithCompression(compressionGzip,
			func() connect.Decompressor { return &boundedGzip{limit: limit + 1} },
			func() connect.Compressor { return gzip.NewWriter(nil) }),
	)
	bodyLimit := limit + limit/64 + 1024 // gzip of incompressible data, envelope
	p, ph := processconnect.NewProcessHandler(&processService{h: h}, opts)
	mux.Handle(p, http.MaxBytesHandler(ph, bodyLimit))
	f, fh := filesystemconnect.NewFilesystemHandler(&filesystemService{h: h}, opts)
	mux.Handle(f, http.MaxBytesHandler(fh, bodyLimit))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /files", h.readFile)
	mux.HandleFunc("POST /files", h.writeFiles)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "no route " + r.Method + " " + r.URL.Path})
	})
	return mux
}

const compressionGzip = "gzip"

// boundedGzip is a gzip Decompressor that fails once it has produced more
// than limit bytes. Connect stops reading at its own limit, but then drains
// the rest of the stream to report the full size; without this bound that
// drain would inflate a whole bomb, costing CPU though not memory.
type boundedGzip struct {
	zr    *gzip.Reader
	n     int64
	limit int64
	err   error // past the limit; nil: errInflated
}

var errInflated = errors.New("decompressed message is too large")

func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.zr == nil {
		return 0, io.ErrUnexpectedEOF
	}
	if d.n >= d.limit {
		if d.err != nil {
			return 0, d.err
		}
		return 0, errInflated
	}
	if rest := d.limit - d.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := d.zr.Read(p)
	d.n += int64(n)
	return n, err
}

func (d *boundedGzip) Close() error {
	if d.zr == nil {
		return nil
	}
	return d.zr.Close()
}

func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	if d.zr == nil {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		d.zr = zr
		return nil
	}
	return d.zr.Reset(r)
}

// use runs fn with the guarded sandbox of the request's context, never a
// fresh one (CreateOptions.ContextID). When that context is no longer live
// (killed, expired, its sandbox lost) it fails with unavailable, which the
// SDKs read as "sandbox not running", as E2B's edge answers.
func (h *Handler) use(ctx context.Context, ref *sandboxRef, fn func(ctx context.Context, sb contexts.Sandbox) error) error {
	called := false
	err := h.cfg.Manager.Use(ctx, ref.rec.Identity, CreateOptions{ContextID: ref.rec.ID}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		called = true
		if rec.ID != ref.rec.ID {
			return sandboxGone(ref.rec.ID)
		}
		return fn(ctx, sb)
	})
	if err != nil && !called && errors.Is(err, errdefs.ErrNotFound) {
		return sandboxGone(ref.rec.ID)
	}
	return err
}

// sandboxGone is the error of a call on a sandbox that ended under it.
func sandboxGone(id string) error {
	return fmt.Errorf("sandbox %s is not running anymore: %w", id, errdefs.ErrUnavailable)
}

// connectError maps an errdefs category to its Connect code (the names are
// the same); uncategorised errors become internal without their text.
func connectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	var code connect.Code
	if e := code.UnmarshalText([]byte(errdefs.CodeOf(err))); e != nil {
		code = connect.CodeInternal
	}
	return connect.NewError(code, errors.New(publicMessage(err)))
}
