// Package envd serves what E2B's in-sandbox daemon, envd, serves on port
// 49983: the Connect RPC process and filesystem services (commands, their
// output streams, stdin, signals; stat, list, move, remove, directory
// watches) and the plain /files and /health routes, every call confined to
// the sandbox its credentials name (core.Edge.Use). Its state of a sandbox
// is the output fan-out of the processes it started and the directory
// watches it runs; they go when the sandbox ends (core.Edge.OnForget).
package envd

import (
	"compress/gzip"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/e2bwire/filesystem/filesystemconnect"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
	"github.com/sandlot/sandlot/errdefs"
)

// Config configures envd. The facade (api/e2bcompat) documents each
// field and applies the defaults.
type Config struct {
	MaxMessageBytes int64 // one Connect message, after decompression
	MaxUploadBytes  int64 // one POST /files body, after decompression
}

// Handler serves envd's routes. It is safe for concurrent use.
type Handler struct {
	edge  *core.Edge
	cfg   Config
	log   *slog.Logger
	mux   http.Handler
	procs *procTable

	mu sync.Mutex
	// watchers holds the created directory watchers by id; watching the
	// claims of every watch, created or streaming, per sandbox (watch.go).
	watchers map[string]*watcher
	watching map[string]map[*claim]bool
}

// New returns envd over edge.
func New(edge *core.Edge, cfg Config) *Handler {
	h := &Handler{edge: edge, cfg: cfg, log: edge.Logger(), procs: newProcTable(edge.Ended),
		watchers: map[string]*watcher{}, watching: map[string]map[*claim]bool{}}
	edge.OnForget(h.forget)
	edge.OnPause(h.stopWatchers)
	h.mux = h.routes()
	return h
}

// ServeHTTP serves an envd call; the request's context carries its
// sandbox (core.WithRef).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// forget drops what envd keeps of a sandbox that ended: its commands'
// streams drop (as E2B's edge drops them), its watches end (their streams
// with unavailable) and give their slots back.
func (h *Handler) forget(sid string) {
	h.procs.forget(sid)
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, w := range h.watchers {
		if w.sid == sid {
			delete(h.watchers, id)
		}
	}
	// Cancelled under mu: a watcher being created sees it before it is
	// kept (CreateWatcher).
	gone := core.SandboxGone(sid)
	for c := range h.watching[sid] {
		c.cancel(gone)
	}
	delete(h.watching, sid)
}

func (h *Handler) routes() http.Handler {
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
		connect.WithCompressMinBytes(compressMinBytes),
	)
	bodyLimit := limit + limit/64 + 1024 // gzip of incompressible data, envelope
	p, ph := processconnect.NewProcessHandler(&processService{h: h}, opts)
	mux.Handle(p, http.MaxBytesHandler(ph, bodyLimit))
	f, fh := filesystemconnect.NewFilesystemHandler(&filesystemService{h: h}, opts)
	mux.Handle(f, http.MaxBytesHandler(fh, bodyLimit))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /files", h.readFile)
	mux.HandleFunc("POST /files", h.writeFiles)
	mux.HandleFunc("/", core.NoRoute)
	return mux
}

const compressionGzip = "gzip"

// compressMinBytes is the smallest Connect message the handler compresses
// for a client that accepts gzip: a stat's or a process event's hundred
// bytes cost more to deflate and inflate than they save on any link (the
// E2B SDK's files.exists fell from about 5 to 3.8 ms p50 on a 2-core VM).
const compressMinBytes = 1024

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
	return connect.NewError(code, errors.New(core.PublicMessage(err)))
}

// Holds reports whether envd keeps anything of sandbox sid (the output
// fan-out of a process, a directory watch): a sandbox that ended has
// nothing left.
func (h *Handler) Holds(sid string) bool {
	if h.procs.holds(sid) {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.watchers {
		if w.sid == sid {
			return true
		}
	}
	return len(h.watching[sid]) > 0
}
