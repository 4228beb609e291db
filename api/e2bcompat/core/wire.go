package core

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// E2B's routing and error shapes, written once for every surface.

// Match reports whether r belongs to the E2B surface: a sandbox call
// (E2b-Sandbox-Id header), a signed file URL or a control-plane path.
func Match(r *http.Request) bool {
	if r.Header.Get(e2bwire.HeaderSandboxID) != "" || SignedRequest(r) {
		return true
	}
	p := r.URL.Path
	return p == "/sandboxes" || strings.HasPrefix(p, "/sandboxes/") ||
		p == "/v2/sandboxes" || strings.HasPrefix(p, "/v2/sandboxes/") ||
		p == "/v3/templates" || p == "/templates" || p == "/v2/templates" || strings.HasPrefix(p, "/templates/") || strings.HasPrefix(p, "/v2/templates/") ||
		p == "/volumes" || strings.HasPrefix(p, "/volumes/") ||
		p == "/snapshots"
}

// HostRoute reads a sandbox call addressed by host name, as the SDKs
// address one when a create returned a domain and no sandbox URL is set:
// <port>-<sandboxID>.<domain>, where port is envd's (49983) or the code
// interpreter's (49999). Other ports are the sandbox's own (the daemon's
// ports route). No domain: no host route.
func HostRoute(domain string, r *http.Request) (sid, port string, ok bool) {
	if domain == "" {
		return "", "", false
	}
	host := r.Host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+strings.ToLower(strings.TrimSuffix(domain, ".")))
	if !ok || strings.Contains(label, ".") {
		return "", "", false
	}
	port, sid, ok = strings.Cut(label, "-")
	if !ok || sid == "" || (port != e2bwire.EnvdPort && port != e2bwire.InterpreterPort) {
		return "", "", false
	}
	return sid, port, true
}

// ConnectRoute reports whether r is an envd Connect call, whose
// compression Connect handles within the envd's message bound.
func ConnectRoute(r *http.Request) bool {
	return r.Header.Get(e2bwire.HeaderSandboxPort) == e2bwire.EnvdPort &&
		(strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/"))
}

// UploadRoute reports whether r is envd's POST /files, which inflates a
// gzip body within envd's upload bound.
func UploadRoute(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/files" &&
		(r.Header.Get(e2bwire.HeaderSandboxPort) == e2bwire.EnvdPort || r.Header.Get(e2bwire.HeaderSandboxID) == "")
}

// IdentityEncoding reports whether a Content-Encoding leaves the body as
// it is.
func IdentityEncoding(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc == "" || strings.EqualFold(enc, "identity")
}

// APIError is the control plane's error body.
type APIError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// WriteError answers r, a request Match accepts, with err in the shape
// its route speaks: a Connect error on envd's Connect routes, the control
// plane's {code:int, message} elsewhere.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if !ConnectRoute(r) {
		WriteAPIError(w, err)
		return
	}
	status := errdefs.HTTPStatus(err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	retryAfter(w, err)
	WriteJSON(w, status, struct {
		Code    errdefs.Code `json:"code"`
		Message string       `json:"message"`
	}{errdefs.CodeOf(err), PublicMessage(err)})
}

// WriteAPIError writes err as {code, message} with its category's status.
func WriteAPIError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	retryAfter(w, err)
	WriteJSON(w, status, APIError{Code: status, Message: PublicMessage(err)})
}

// retryAfter sets Retry-After when err is an expected state that passes
// (errdefs.Retry: a template being built).
func retryAfter(w http.ResponseWriter, err error) {
	if d, ok := errdefs.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(d, time.Second).Round(time.Second).Seconds())))
	}
}

// WriteStatus writes {code, message} with status.
func WriteStatus(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, APIError{Code: status, Message: msg})
}

// WriteConflict answers 409 with msg.
func WriteConflict(w http.ResponseWriter, msg string) {
	WriteStatus(w, http.StatusConflict, msg)
}

// NoRoute answers a path a surface does not serve.
func NoRoute(w http.ResponseWriter, r *http.Request) {
	WriteStatus(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
}

// WriteGone answers a call to a sandbox that is not there (any more) as
// E2B does: 404 on the code interpreter's port (the code interpreter SDK
// throws NotFoundError), the edge proxy's 502 elsewhere (the SDKs read it
// as "not running").
func WriteGone(w http.ResponseWriter, port, sid string) {
	status := http.StatusBadGateway
	if port == e2bwire.InterpreterPort {
		status = http.StatusNotFound
	}
	WriteProxyError(w, status, sid, "The sandbox was not found")
}

// WriteProxyError mimics the E2B edge proxy's answer for a sandbox or port
// that is not there; the SDKs read 502 as "sandbox gone".
func WriteProxyError(w http.ResponseWriter, status int, sid, msg string) {
	WriteJSON(w, status, struct {
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
		Code      int    `json:"code"`
	}{sid, msg, status})
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"code":500,"message":"internal error"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// DecodeBody decodes an optional JSON body of at most 1 MiB.
func DecodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read body: %w", errdefs.ErrInvalidArgument)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("invalid JSON body: %w", errdefs.ErrInvalidArgument)
	}
	return nil
}

// runtimeID matches sandlot's runtime sandbox id where an error names it
// ("sandbox sb-0123456789ab: fs.write: …", the agent client's prefix). E2B
// callers know the sandbox by its E2B id; the runtime's is internal.
var runtimeID = regexp.MustCompile(`sandbox ` + regexp.QuoteMeta(runtime.IDPrefix) + `[0-9a-f]+: `)

// PublicMessage is errdefs.PublicMessage without runtime sandbox ids.
func PublicMessage(err error) string {
	return runtimeID.ReplaceAllString(errdefs.PublicMessage(err), "")
}
