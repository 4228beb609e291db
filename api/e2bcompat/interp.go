package e2bcompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// codeContext is an E2B code context: a named kernel of one language.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

const defaultCwd = "/home/user"

// kernelLanguage maps E2B language names to sandlot's.
func kernelLanguage(l string) (string, error) {
	switch l {
	case "", "python", "python3":
		return agent.Python, nil
	case "js", "javascript", "node", "nodejs":
		return agent.JavaScript, nil
	case "ts", "typescript":
		return agent.TypeScript, nil
	case "bash", "sh", "shell":
		return agent.Bash, nil
	}
	return "", fmt.Errorf("language %q is not supported (python, javascript, typescript, bash): %w", l, errdefs.ErrInvalidArgument)
}

func (h *Handler) interpMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /execute", h.execute)
	mux.HandleFunc("POST /contexts", h.createContext)
	mux.HandleFunc("GET /contexts", h.listContexts)
	mux.HandleFunc("DELETE /contexts/{id}", h.deleteContext)
	mux.HandleFunc("POST /contexts/{id}/restart", h.restartContext)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "no route " + r.Method + " " + r.URL.Path})
	})
	return mux
}

func (h *Handler) codeContext(sid, id string) *codeContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.codeCtxs[sid][id]
}

type executeBody struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// ndjson writes one JSON object per line, flushing each; the SDK throws on
// a blank line, and json.Marshal never yields one.
type ndjson struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	started bool
}

func (n *ndjson) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started {
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.WriteHeader(http.StatusOK)
		n.started = true
	}
	n.w.Write(append(b, '\n'))
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

// coalescer joins the kernel's output chunks into lines, as Jupyter's
// stream messages do ("hello" and "\n" from one print become one
// "hello\n"), and flushes a partial line after coalesceWait.
type coalescer struct {
	out *ndjson

	mu     sync.Mutex
	stream string
	buf    strings.Builder
	timer  *time.Timer
	closed bool
}

const coalesceWait = 50 * time.Millisecond

// maxCoalesced bounds a partial line held back for coalescing: output
// without newlines is sent in pieces of about this size.
const maxCoalesced = 64 << 10

func (c *coalescer) add(stream, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if stream != c.stream {
		c.flushLocked()
		c.stream = stream
	}
	c.buf.WriteString(text)
	if strings.HasSuffix(text, "\n") || c.buf.Len() >= maxCoalesced {
		c.flushLocked()
		return
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(coalesceWait, c.flush)
	}
}

func (c *coalescer) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.flushLocked()
	}
}

// close flushes and stops: nothing is written after it returns.
func (c *coalescer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
	c.closed = true
}

func (c *coalescer) flushLocked() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.buf.Len() == 0 {
		return
	}
	c.out.send(outputLine{Type: c.stream, Text: c.buf.String(), Timestamp: time.Now().UTC().Format(time.RFC3339Nano)})
	c.buf.Reset()
}

type outputLine struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Timestamp string `json:"timestamp"`
}

type resultLine struct {
	Type         string          `json:"type"`
	IsMainResult bool            `json:"is_main_result"`
	Text         string          `json:"text,omitempty"`
	HTML         string          `json:"html,omitempty"`
	Markdown     string          `json:"markdown,omitempty"`
	SVG          string          `json:"svg,omitempty"`
	PNG          string          `json:"png,omitempty"`
	JPEG         string          `json:"jpeg,omitempty"`
	LaTeX        string          `json:"latex,omitempty"`
	JSON         json.RawMessage `json:"json,omitempty"`
	JavaScript   string          `json:"javascript,omitempty"`
}

func resultOf(r *agent.RichResult) resultLine {
	return resultLine{Type: "result", IsMainResult: r.Main, Text: r.Text, HTML: r.HTML, Markdown: r.Markdown,
		SVG: r.SVG, PNG: r.PNG, JPEG: r.JPEG, LaTeX: r.LaTeX, JSON: r.JSON, JavaScript: r.JavaScript}
}

type errorLine struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// execute serves POST /execute as NDJSON: stdout, stderr and result lines as
// they arrive, then error (if any), number_of_executions and
// end_of_execution.
func (h *Handler) execute(w http.ResponseWriter, r *http.Request) {
	ref := sandboxFrom(r.Context())
	var body executeBody
	if err := decodeBody(r, &body); err != nil {
		writeAPIError(w, err)
		return
	}
	req := ExecuteRequest{Code: body.Code, Env: body.EnvVars, ContextID: ref.rec.ID}
	if body.ContextID != "" {
		cc := h.codeContext(ref.rec.ID, body.ContextID)
		if cc == nil {
			writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "context " + body.ContextID + " not found"})
			return
		}
		req.Language, req.Kernel = cc.Language, cc.ID
	} else {
		lang, err := kernelLanguage(body.Language)
		if err != nil {
			writeAPIError(w, err)
			return
		}
		req.Language = lang
	}
	out := &ndjson{w: w}
	logs := &coalescer{out: out}
	var streamedOut, streamedErr, streamedRes bool
	res, err := h.cfg.Manager.Execute(r.Context(), ref.rec.Identity, req, func(ev agent.OutputEvent) {
		switch ev.Stream {
		case agent.Stdout:
			streamedOut = true
			logs.add("stdout", ev.Data)
		case agent.Stderr:
			streamedErr = true
			logs.add("stderr", ev.Data)
		case agent.Result:
			if ev.Result != nil {
				streamedRes = true
				logs.flush()
				out.send(resultOf(ev.Result))
			}
		}
	})
	logs.close()
	if err != nil {
		if !out.started {
			if errors.Is(err, errdefs.ErrNotFound) { // the sandbox ended under this call
				writeProxyError(w, http.StatusBadGateway, ref.rec.ID, "The sandbox was not found")
				return
			}
			writeAPIError(w, err)
			return
		}
		out.send(errorLine{Type: "error", Name: "SandlotError", Value: errdefs.PublicMessage(err)})
		out.send(struct {
			Type string `json:"type"`
		}{"end_of_execution"})
		return
	}
	if !streamedOut && res.Stdout != "" {
		out.send(outputLine{Type: "stdout", Text: res.Stdout, Timestamp: time.Now().UTC().Format(time.RFC3339Nano)})
	}
	if !streamedErr && res.Stderr != "" {
		out.send(outputLine{Type: "stderr", Text: res.Stderr, Timestamp: time.Now().UTC().Format(time.RFC3339Nano)})
	}
	if !streamedRes {
		for i := range res.Results {
			out.send(resultOf(&res.Results[i]))
		}
	}
	switch {
	case res.Error != nil:
		out.send(errorLine{Type: "error", Name: res.Error.Name, Value: res.Error.Value, Traceback: res.Error.Traceback})
	case res.TimedOut:
		out.send(errorLine{Type: "error", Name: "TimeoutError", Value: "execution timed out"})
	}
	out.send(struct {
		Type           string `json:"type"`
		ExecutionCount int    `json:"execution_count"`
	}{"number_of_executions", res.ExecutionCount})
	out.send(struct {
		Type string `json:"type"`
	}{"end_of_execution"})
}

type contextBody struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (h *Handler) createContext(w http.ResponseWriter, r *http.Request) {
	ref := sandboxFrom(r.Context())
	var body contextBody
	if err := decodeBody(r, &body); err != nil {
		writeAPIError(w, err)
		return
	}
	lang, err := kernelLanguage(body.Language)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	cc := &codeContext{ID: uuid.NewString(), Language: lang, Cwd: body.Cwd}
	if cc.Cwd == "" {
		cc.Cwd = defaultCwd
	}
	if err := h.chdir(r.Context(), ref, cc); err != nil {
		writeAPIError(w, err)
		return
	}
	h.mu.Lock()
	if h.codeCtxs[ref.rec.ID] == nil {
		h.codeCtxs[ref.rec.ID] = map[string]*codeContext{}
	}
	h.codeCtxs[ref.rec.ID][cc.ID] = cc
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, cc)
}

// chdir starts the context's kernel in its working directory.
func (h *Handler) chdir(ctx context.Context, ref *sandboxRef, cc *codeContext) error {
	var code string
	q := strconv.Quote(cc.Cwd)
	switch cc.Language {
	case agent.Python:
		code = "import os\nos.makedirs(" + q + ", exist_ok=True)\nos.chdir(" + q + ")\n"
	case agent.JavaScript, agent.TypeScript:
		code = "require('fs').mkdirSync(" + q + ", {recursive: true}); process.chdir(" + q + ");"
	case agent.Bash:
		code = "mkdir -p " + shellQuote(cc.Cwd) + " && cd " + shellQuote(cc.Cwd)
	}
	res, err := h.cfg.Manager.Execute(ctx, ref.rec.Identity, ExecuteRequest{Language: cc.Language, Code: code, Kernel: cc.ID, ContextID: ref.rec.ID}, nil)
	if err != nil {
		return err
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
	ref := sandboxFrom(r.Context())
	h.mu.Lock()
	out := []*codeContext{}
	for _, cc := range h.codeCtxs[ref.rec.ID] {
		out = append(out, cc)
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(w, http.StatusOK, out)
}

// deleteContext forgets a code context. Its kernel is left to the
// sandbox's life: the agent protocol has no call to stop one kernel.
func (h *Handler) deleteContext(w http.ResponseWriter, r *http.Request) {
	ref := sandboxFrom(r.Context())
	id := r.PathValue("id")
	h.mu.Lock()
	_, ok := h.codeCtxs[ref.rec.ID][id]
	delete(h.codeCtxs[ref.rec.ID], id)
	h.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "context " + id + " not found"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) restartContext(w http.ResponseWriter, r *http.Request) {
	ref := sandboxFrom(r.Context())
	cc := h.codeContext(ref.rec.ID, r.PathValue("id"))
	if cc == nil {
		writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "context " + r.PathValue("id") + " not found"})
		return
	}
	err := h.use(r.Context(), ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.RestartKernel(ctx, agent.KernelParams{Language: cc.Language, Kernel: cc.ID})
	})
	if err == nil {
		err = h.chdir(r.Context(), ref, cc)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
