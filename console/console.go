// Package console is sandlot's web console, served at /ui: the contexts
// of a tenant (every tenant's for an admin key), live; a context's editor,
// output, calls, files and terminal. The page is static: its assets are
// built from web/ by package bundle into dist/ (committed, and checked
// current by a test) and embedded in the binary, so it needs no CDN and
// works offline.
//
// The page holds the API key in sessionStorage and sends it in the
// Authorization header of each call (the shell's WebSocket: a
// subprotocol); there is no cookie, so no ambient authority for another
// site to ride. Its Content-Security-Policy allows script, style and
// connections from its own origin only, images also as data: and blob:
// URLs (charts), and no inline script or style.
package console

//go:generate go run gen.go

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Path is where the front door mounts the console.
const Path = "/ui"

// CSP is the Content-Security-Policy of every answer of the console.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed dist
var dist embed.FS

// asset is one file of the bundle, with its gzip form when smaller.
type asset struct {
	body, gz []byte
	ctype    string
	etag     string
	// immutable: a chunk's name carries its content's hash.
	immutable bool
}

// Handler serves the console under Path: the page at Path and Path/, its
// assets at Path/<name>, 404 for anything else. Only GET and HEAD.
type Handler struct {
	assets map[string]*asset
	csp    string // CSP, or LiveViewCSP's
}

// LiveViewCSP is CSP with desktop live views allowed in frames: the pages
// of https://<port>-<sandbox>.<domain>, the ports route's names, which
// are never the console's origin, so a page a sandbox serves cannot reach
// the console's storage (the key). Nothing else may be framed.
func LiveViewCSP(domain string) string {
	return CSP + "; frame-src https://*." + domain
}

// validDomain is a DNS name of lowercase letters, digits, '-' and '.':
// what may go into a CSP source expression unquoted.
var validDomain = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)

// WithLiveViews returns h serving LiveViewCSP(domain): the daemon's ports
// domain, when it serves desktops' live views. A domain that is not a
// plain DNS name is refused (it would change the policy's meaning).
func (h *Handler) WithLiveViews(domain string) (*Handler, error) {
	if len(domain) > 253 || !validDomain.MatchString(domain) {
		return nil, fmt.Errorf("console: live views: ports domain %q is not a DNS name of lowercase letters, digits, '-' and '.'", domain)
	}
	return &Handler{assets: h.assets, csp: LiveViewCSP(domain)}, nil
}

// New returns the console's handler over the embedded bundle.
func New() *Handler { return newHandler(mustSub(dist, "dist")) }

func mustSub(f fs.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return s
}

func newHandler(files fs.FS) *Handler {
	h := &Handler{assets: map[string]*asset{}, csp: CSP}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		a := &asset{body: b, ctype: mime.TypeByExtension(path.Ext(e.Name())),
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`, immutable: strings.HasPrefix(e.Name(), "chunk-")}
		if a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		if gz.Len() < len(b) {
			a.gz = gz.Bytes()
		}
		h.assets[e.Name()] = a
	}
	return h
}

// Match reports whether r is the console's.
func Match(r *http.Request) bool {
	return r.URL.Path == Path || strings.HasPrefix(r.URL.Path, Path+"/")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", h.csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, Path), "/")
	if name == "" {
		name = "index.html"
	}
	a := h.assets[name]
	if a == nil || strings.Contains(name, "/") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if a.immutable {
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hdr.Set("Cache-Control", "no-cache")
	}
	hdr.Set("ETag", a.etag)
	hdr.Set("Vary", "Accept-Encoding")
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = a.gz
		hdr.Set("Content-Encoding", "gzip")
	}
	hdr.Set("Content-Type", a.ctype)
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reports whether an Accept-Encoding names gzip (without q=0).
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.ReplaceAll(params, " ", "") != "q=0"
		}
	}
	return false
}

// staticImport finds the chunks an entry imports before it runs.
var staticImport = regexp.MustCompile(`(?:import|from)\s*"\./(chunk-[A-Z0-9]+\.js)"`)

// Sizes returns the bytes the first load fetches (the page, main.js,
// the chunks it imports statically and main.css), plain and gzipped: the
// bench's initial bundle.
func (h *Handler) Sizes() (plain, gzipped int) {
	names := []string{"index.html", "main.js", "main.css"}
	if a := h.assets["main.js"]; a != nil {
		for _, m := range staticImport.FindAllSubmatch(a.body, -1) {
			names = append(names, string(m[1]))
		}
	}
	for _, n := range names {
		if a := h.assets[n]; a != nil {
			plain += len(a.body)
			if a.gz != nil {
				gzipped += len(a.gz)
			} else {
				gzipped += len(a.body)
			}
		}
	}
	return plain, gzipped
}
