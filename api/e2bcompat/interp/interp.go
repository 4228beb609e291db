// Package interp serves E2B's code interpreter on port 49999: /execute
// (a cell run as NDJSON lines) and the code contexts (/contexts: named
// kernels of one language and working directory), every run confined to
// the sandbox its credentials name. The code contexts are its state of a
// sandbox; they go when the sandbox ends (core.Edge.OnForget).
package interp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
)

// Config configures the code interpreter.
type Config struct {
	// PlainPython runs python cells in the plain python kernel instead of
	// IPython (the facade's Config.PlainPython).
	PlainPython bool
}

// Handler serves the code interpreter's routes. It is safe for concurrent
// use.
type Handler struct {
	edge *core.Edge
	m    core.Manager
	cfg  Config
	mux  *http.ServeMux

	mu sync.Mutex
	// codeCtxs holds the code contexts of each sandbox.
	codeCtxs map[string]map[string]*codeContext
}

// New returns the code interpreter over edge.
func New(edge *core.Edge, cfg Config) *Handler {
	h := &Handler{edge: edge, m: edge.Manager(), cfg: cfg, codeCtxs: map[string]map[string]*codeContext{}}
	edge.OnForget(h.forget)
	h.mux = h.routes()
	return h
}

// ServeHTTP serves a code interpreter call; the request's context carries
// its sandbox (core.WithRef).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// forget drops the code contexts of a sandbox that ended.
func (h *Handler) forget(sid string) {
	h.mu.Lock()
	delete(h.codeCtxs, sid)
	h.mu.Unlock()
}

// codeContext is an E2B code context: a named kernel of one language.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`

	kernel string // the agent's kernel name: "" for a default context, else ID
	user   string // who the kernel runs as: "" (the user) or agent.RootUser
	seq    int    // creation order, which GET /contexts keeps
}

const defaultCwd = "/home/user"

// defaultLanguages are the code contexts every sandbox lists before any is
// created, as E2B's code interpreter does: they are the languages' default
// kernels, the ones runCode uses without a context.
var defaultLanguages = []string{agent.Python, agent.JavaScript}

// rootCwd reports whether a context's working directory is root's home,
// which only root may enter: such a context's kernel runs as root (E2B's
// kernels run as root; sandlot's run as the user unless they must not).
func rootCwd(cwd string) bool {
	return cwd == "/root" || strings.HasPrefix(cwd, "/root/")
}

// contextsOf returns the code contexts of sandbox sid, the defaults made on
// first use. A sandbox that ended keeps none: a call under way then gets
// the defaults, kept nowhere. Precondition: h.mu is held.
func (h *Handler) contextsOf(sid string) map[string]*codeContext {
	m := h.codeCtxs[sid]
	if m == nil {
		m = map[string]*codeContext{}
		for i, lang := range defaultLanguages {
			id := uuid.NewString()
			m[id] = &codeContext{ID: id, Language: lang, Cwd: defaultCwd, seq: i}
		}
		if !h.edge.Ended(sid) {
			h.codeCtxs[sid] = m
		}
	}
	return m
}

// kernelLanguage maps E2B language names to sandlot's.
func kernelLanguage(l string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(l)) {
	case "", "python", "python3":
		return agent.Python, nil
	case "js", "javascript", "node", "nodejs":
		return agent.JavaScript, nil
	case "ts", "typescript":
		return agent.TypeScript, nil
	case "bash", "sh", "shell":
		return agent.Bash, nil
	case "r":
		return agent.R, nil
	case "java":
		return agent.Java, nil
	}
	return "", fmt.Errorf("language %q is not supported: sandboxes have python, javascript, typescript, bash, r and java kernels: %w", l, errdefs.ErrInvalidArgument)
}

// notInTemplate turns the agent's answer for a language whose interpreter
// the sandbox's image lacks (failed_precondition: R and Java are only in
// the code-interpreter template) into one that says where they are.
func notInTemplate(lang string, err error) error {
	if (lang != agent.R && lang != agent.Java) || !notOffered(err) {
		return err
	}
	return fmt.Errorf("language %q is not supported by this sandbox's template: R and Java kernels are in the %q template (Sandbox.create(%q)): %w",
		lang, templates.CodeInterpreter, templates.CodeInterpreter, errdefs.ErrFailedPrecondition)
}

// notOffered: the sandbox has no kernel for the run's language, as its
// agent says (failed_precondition) or as the manager knows from the
// template before it asks (contexts.ErrLanguageNotOffered).
func notOffered(err error) bool {
	return errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, contexts.ErrLanguageNotOffered)
}

func (h *Handler) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /execute", h.execute)
	mux.HandleFunc("POST /contexts", h.createContext)
	mux.HandleFunc("GET /contexts", h.listContexts)
	mux.HandleFunc("DELETE /contexts/{id}", h.deleteContext)
	mux.HandleFunc("POST /contexts/{id}/restart", h.restartContext)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", core.NoRoute)
	return mux
}

func (h *Handler) codeContext(sid, id string) *codeContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.contextsOf(sid)[id]
}

type contextBody struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (h *Handler) createContext(w http.ResponseWriter, r *http.Request) {
	ref := core.RefFrom(r.Context())
	var body contextBody
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	lang, err := kernelLanguage(body.Language)
	if err != nil {
		// 501: the SDK's error then reads "501 Not Implemented"; the body
		// names the languages there are.
		core.WriteJSON(w, http.StatusNotImplemented, core.APIError{Code: http.StatusNotImplemented, Message: core.PublicMessage(err)})
		return
	}
	cc := &codeContext{ID: uuid.NewString(), Language: lang, Cwd: path.Clean("/" + body.Cwd)}
	if body.Cwd == "" {
		cc.Cwd = defaultCwd
	}
	cc.kernel = cc.ID
	if rootCwd(cc.Cwd) {
		cc.user = agent.RootUser
	}
	if err := h.chdir(r.Context(), ref, cc); err != nil {
		if notOffered(err) && (lang == agent.R || lang == agent.Java) {
			// Not in this template: 501, as for a language with no kernel.
			core.WriteJSON(w, http.StatusNotImplemented, core.APIError{Code: http.StatusNotImplemented, Message: core.PublicMessage(err)})
			return
		}
		core.WriteAPIError(w, err)
		return
	}
	h.mu.Lock()
	m := h.contextsOf(ref.Rec.ID)
	cc.seq = len(defaultLanguages)
	for _, o := range m {
		cc.seq = max(cc.seq, o.seq+1)
	}
	m[cc.ID] = cc
	h.mu.Unlock()
	core.WriteJSON(w, http.StatusOK, cc)
}

// chdir starts the context's kernel in its working directory.
func (h *Handler) chdir(ctx context.Context, ref *core.Ref, cc *codeContext) error {
	var code string
	q := strconv.Quote(cc.Cwd)
	switch cc.Language {
	case agent.Python:
		code = "import os\nos.makedirs(" + q + ", exist_ok=True)\nos.chdir(" + q + ")\n"
	case agent.JavaScript, agent.TypeScript:
		code = "require('fs').mkdirSync(" + q + ", {recursive: true}); process.chdir(" + q + ");"
	case agent.Bash:
		code = "mkdir -p " + shellQuote(cc.Cwd) + " && cd " + shellQuote(cc.Cwd)
	case agent.R:
		code = "dir.create(" + q + ", recursive = TRUE, showWarnings = FALSE); setwd(" + q + ")"
	case agent.Java:
		// As on E2B: the JVM cannot change its working directory, so the
		// context's is its user.dir (what relative java.io.File paths and
		// System.getProperty("user.dir") go by).
		code = "new java.io.File(" + q + ").mkdirs(); System.setProperty(\"user.dir\", " + q + ");"
	}
	res, err := h.m.Execute(ctx, ref.Rec.Identity, core.ExecuteRequest{Language: cc.Language, Code: code, Kernel: cc.kernel, User: cc.user, ContextID: ref.Rec.ID}, nil)
	if err != nil {
		return notInTemplate(cc.Language, err)
	}
	if !res.Success {
		return fmt.Errorf("cannot use %s as the working directory: %w", cc.Cwd, errdefs.ErrInvalidArgument)
	}
	return nil
}

func shellQuote(s string) string {
	out := "'"
	for _, c := range s {
		if c == '\'' {
			out += `'\''`
		} else {
			out += string(c)
		}
	}
	return out + "'"
}

func (h *Handler) listContexts(w http.ResponseWriter, r *http.Request) {
	ref := core.RefFrom(r.Context())
	h.mu.Lock()
	out := []*codeContext{}
	for _, cc := range h.contextsOf(ref.Rec.ID) {
		out = append(out, cc)
	}
	h.mu.Unlock()
	// Oldest first, the defaults before any created one, as E2B lists them.
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	core.WriteJSON(w, http.StatusOK, out)
}

// deleteContext forgets a code context. Its kernel is left to the
// sandbox's life: the agent protocol has no call to stop one kernel.
func (h *Handler) deleteContext(w http.ResponseWriter, r *http.Request) {
	ref := core.RefFrom(r.Context())
	id := r.PathValue("id")
	h.mu.Lock()
	m := h.contextsOf(ref.Rec.ID)
	_, ok := m[id]
	delete(m, id)
	h.mu.Unlock()
	if !ok {
		core.WriteJSON(w, http.StatusNotFound, core.APIError{Code: http.StatusNotFound, Message: "context " + id + " not found"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) restartContext(w http.ResponseWriter, r *http.Request) {
	ref := core.RefFrom(r.Context())
	cc := h.codeContext(ref.Rec.ID, r.PathValue("id"))
	if cc == nil {
		core.WriteJSON(w, http.StatusNotFound, core.APIError{Code: http.StatusNotFound, Message: "context " + r.PathValue("id") + " not found"})
		return
	}
	err := h.edge.Use(r.Context(), ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.RestartKernel(ctx, agent.KernelParams{Language: cc.Language, Kernel: cc.kernel, User: cc.user})
	})
	if err == nil {
		err = h.chdir(r.Context(), ref, cc)
	}
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Holds reports whether the code interpreter keeps anything of sandbox
// sid (code contexts): a sandbox that ended has nothing left.
func (h *Handler) Holds(sid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.codeCtxs[sid]
	return ok
}
