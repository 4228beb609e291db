package interp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
)

// Bounds of POST /execute. A cell may be larger than the manager's own
// MaxCodeBytes (E2B takes cells of hundreds of KB), up to
// contexts.MaxCodeLimit; the body may carry it JSON-escaped.
const (
	maxCell        = contexts.MaxCodeLimit
	maxExecuteBody = 4 * maxCell
)

// interpKeepaliveEvery is how often a silent run sends a keepalive line, as
// E2B's server does: a write on a connection whose client left fails,
// and proxies see traffic.
var interpKeepaliveEvery = 5 * time.Second

type executeBody struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// headerDelay is how long a run may go without output before its
// response headers are sent anyway (the SDK's requestTimeoutMs runs until
// they arrive). Errors known before then (a sandbox that is gone, a bad
// request) still get their own status.
var headerDelay = 100 * time.Millisecond

// ndjson writes one JSON object per line, flushing each; the SDK throws on
// a blank line, and json.Marshal never yields one.
type ndjson struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	started bool
	decided bool // start no longer sends headers: the answer is decided
}

// start sends the status line and headers now, before any output, unless
// the answer was decided (decide).
func (n *ndjson) start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.decided {
		n.startLocked()
	}
}

// decide stops start from sending headers and reports whether they were
// sent: if not, the caller may still answer with another status.
func (n *ndjson) decide() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.decided = true
	return n.started
}

func (n *ndjson) startLocked() {
	if n.started {
		return
	}
	n.w.Header().Set("Content-Type", "application/x-ndjson")
	n.w.WriteHeader(http.StatusOK)
	n.started = true
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (n *ndjson) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.startLocked()
	n.w.Write(append(b, '\n'))
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

// keepalive sends a keepalive line every interpKeepaliveEvery until stop is
// called; stop returns once nothing more will be sent.
func (n *ndjson) keepalive() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interpKeepaliveEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n.send(typeLine{"keepalive"})
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
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
	c.out.send(outputLine{Type: c.stream, Text: c.buf.String(), Timestamp: now()})
	c.buf.Reset()
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

type typeLine struct {
	Type string `json:"type"`
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
	Data         json.RawMessage `json:"data,omitempty"`
	Chart        json.RawMessage `json:"chart,omitempty"`
}

func resultOf(r *agent.RichResult) resultLine {
	return resultLine{Type: "result", IsMainResult: r.Main, Text: resultText(r.Text), HTML: r.HTML, Markdown: r.Markdown,
		SVG: r.SVG, PNG: r.PNG, JPEG: r.JPEG, LaTeX: r.LaTeX, JSON: r.JSON, JavaScript: r.JavaScript, Data: r.Data, Chart: r.Chart}
}

// resultText is a result's text as E2B's server reports it: a text/plain
// wholly inside one pair of quotes (the repr of a string) loses them, so
// os.getenv("X") reads "bar", not "'bar'".
func resultText(t string) string {
	if len(t) >= 2 && (t[0] == '\'' && t[len(t)-1] == '\'' || t[0] == '"' && t[len(t)-1] == '"') {
		return t[1 : len(t)-1]
	}
	return t
}

type errorLine struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// readExecuteBody decodes the /execute body; over maxExecuteBody is 413
// with the limit in the message.
func readExecuteBody(r *http.Request) (*executeBody, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxExecuteBody+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", errdefs.ErrInvalidArgument)
	}
	if len(b) > maxExecuteBody {
		return nil, fmt.Errorf("the request body is over %d bytes: %w", maxExecuteBody, errdefs.ErrResourceExhausted)
	}
	var body executeBody
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			return nil, fmt.Errorf("invalid JSON body: %w", errdefs.ErrInvalidArgument)
		}
	}
	return &body, nil
}

// execute serves POST /execute as NDJSON: the headers at once, then
// stdout, stderr and result lines as they arrive (keepalive lines while
// the cell is silent), then error (if any), number_of_executions and
// end_of_execution. A run has no server-side time limit, as on E2B: the
// SDK's timeoutMs is enforced by the client, whose hang-up cancels the run
// (the kernel is interrupted).
func (h *Handler) execute(w http.ResponseWriter, r *http.Request) {
	ref := core.RefFrom(r.Context())
	body, err := readExecuteBody(r)
	if err != nil {
		writeExecuteError(w, err)
		return
	}
	if len(body.Code) > maxCell {
		core.WriteJSON(w, http.StatusRequestEntityTooLarge, core.APIError{Code: http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("the cell is %d bytes; the limit is %d bytes", len(body.Code), maxCell)})
		return
	}
	if body.ContextID != "" && body.Language != "" {
		core.WriteJSON(w, http.StatusBadRequest, core.APIError{Code: http.StatusBadRequest, Message: "Only one of context_id or language can be provided"})
		return
	}
	req := core.ExecuteRequest{Code: body.Code, Env: body.EnvVars, ContextID: ref.Rec.ID, Unbounded: true, CodeLimit: maxCell}
	out := &ndjson{w: w}
	if body.ContextID != "" {
		cc := h.codeContext(ref.Rec.ID, body.ContextID)
		if cc == nil {
			core.WriteJSON(w, http.StatusNotFound, core.APIError{Code: http.StatusNotFound, Message: "context " + body.ContextID + " not found"})
			return
		}
		req.Language, req.Kernel, req.User = cc.Language, cc.kernel, cc.user
	} else {
		lang, err := kernelLanguage(body.Language)
		if err != nil {
			// E2B's own shape for a cell that cannot run: an execution
			// error the SDK hands back in Execution.error.
			out.send(errorLine{Type: "error", Name: "NotSupportedError", Value: core.PublicMessage(err)})
			out.send(typeLine{"end_of_execution"})
			return
		}
		req.Language = lang
	}
	req.IPython = !h.cfg.PlainPython
	headers := time.AfterFunc(headerDelay, out.start)
	stopKeepalive := out.keepalive()
	logs := &coalescer{out: out}
	var streamedOut, streamedErr, streamedRes bool
	res, err := h.m.Execute(r.Context(), ref.Rec.Identity, req, func(ev agent.OutputEvent) {
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
	stopKeepalive()
	headers.Stop()
	started := out.decide()
	if r.Context().Err() != nil {
		return // the client hung up (its timeoutMs): the run was interrupted
	}
	if err != nil && !started && notInTemplate(req.Language, err) == err {
		if errors.Is(err, errdefs.ErrNotFound) { // the sandbox ended before the run
			h.edge.Forget(ref.Rec.ID)
			core.WriteGone(w, e2bwire.InterpreterPort, ref.Rec.ID)
			return
		}
		core.WriteAPIError(w, err)
		return
	}
	if err != nil || res.KernelRestarted {
		if h.edge.GoneUnder(r.Context(), ref) {
			// The sandbox was killed under the run. E2B's edge drops the
			// connection; the SDK then finds the sandbox not running and
			// throws "The sandbox was killed while the request was in
			// progress".
			panic(http.ErrAbortHandler)
		}
	}
	if err != nil {
		name := errorName(err)
		if e := notInTemplate(req.Language, err); e != err {
			name, err = "NotSupportedError", e
		}
		out.send(errorLine{Type: "error", Name: name, Value: core.PublicMessage(err)})
		out.send(typeLine{"end_of_execution"})
		return
	}
	if !streamedOut && res.Stdout != "" {
		out.send(outputLine{Type: "stdout", Text: res.Stdout, Timestamp: now()})
	}
	if !streamedErr && res.Stderr != "" {
		out.send(outputLine{Type: "stderr", Text: res.Stderr, Timestamp: now()})
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
	out.send(typeLine{"end_of_execution"})
}

// errorName names a failed run's error line after its category.
func errorName(err error) string {
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return "InvalidArgumentError"
	case errors.Is(err, errdefs.ErrResourceExhausted):
		return "RateLimitError"
	case errors.Is(err, errdefs.ErrUnavailable):
		return "SandboxError"
	}
	return "SandlotError"
}

// writeExecuteError answers a refused /execute body: 413 for a body over
// the bound, else the error's category.
func writeExecuteError(w http.ResponseWriter, err error) {
	if errors.Is(err, errdefs.ErrResourceExhausted) {
		core.WriteJSON(w, http.StatusRequestEntityTooLarge, core.APIError{Code: http.StatusRequestEntityTooLarge, Message: core.PublicMessage(err)})
		return
	}
	core.WriteAPIError(w, err)
}
