package contexts

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// GuardSandbox wraps sb so that everything it returns passes g for
// tenantID: streamed and final output, rich results, error messages, file
// contents, names and paths. With a nil g it returns sb unchanged.
//
// File bytes pass Guard.File: text is redacted whatever bytes it holds, and
// a binary format (recognised by its signature) keeps its length with the
// text in it masked. PNG and JPEG results pass Guard.Image: one that is
// not an image is dropped with a marker in the result's text. The wrapper's
// ReadFile redacts the range it returns as a file of its own; chunked
// readers use the package's ReadFile, which keeps one redactor across the
// chunks. Close on the wrapper is a no-op: the Manager owns the
// connection.
func GuardSandbox(sb Sandbox, g Guard, tenantID string) Sandbox {
	if g == nil {
		return sb
	}
	return &guardedSandbox{sb: sb, g: g, tenant: tenantID}
}

type guardedSandbox struct {
	sb     Sandbox
	g      Guard
	tenant string
	masked []string // declared secret values (MaskedValues), whatever ctx a method gets
}

// gctx is ctx for the guard: it carries the context's declared secrets even
// when the caller passes a ctx other than the one Use handed it.
func (s *guardedSandbox) gctx(ctx context.Context) context.Context {
	if len(s.masked) == 0 || len(MaskedValues(ctx)) >= len(s.masked) {
		return ctx
	}
	return WithMasked(ctx, s.masked)
}

var _ Sandbox = (*guardedSandbox)(nil)

func (s *guardedSandbox) text(ctx context.Context, v string) string {
	if v == "" {
		return v
	}
	return s.g.Text(s.gctx(ctx), s.tenant, v)
}

func (s *guardedSandbox) err(ctx context.Context, err error) error {
	return guardError(s.gctx(ctx), s.g, s.tenant, err)
}

func (s *guardedSandbox) info(ctx context.Context, fi *agent.FileInfo) {
	if fi == nil {
		return
	}
	fi.Name = s.text(ctx, fi.Name)
	fi.Path = s.text(ctx, fi.Path)
	fi.Target = s.text(ctx, fi.Target)
}

func (s *guardedSandbox) ID() string { return s.sb.ID() }

func (s *guardedSandbox) Ping(ctx context.Context) error { return s.err(ctx, s.sb.Ping(ctx)) }

func (s *guardedSandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out OutputFunc) (*agent.RunCodeResult, error) {
	sg := newStreamGuard(s.gctx(ctx), s.g, s.tenant, out)
	res, err := s.sb.RunCode(ctx, p, sg.fn())
	sg.flush()
	if err != nil {
		return nil, s.err(ctx, err)
	}
	return guardRunResult(s.gctx(ctx), s.g, s.tenant, res), nil
}

func (s *guardedSandbox) RestartKernel(ctx context.Context, p agent.KernelParams) error {
	return s.err(ctx, s.sb.RestartKernel(ctx, p))
}

func (s *guardedSandbox) Exec(ctx context.Context, p agent.ExecParams, out OutputFunc) (*agent.ExecResult, error) {
	return s.guardedExec(ctx, out, func(fn OutputFunc) (*agent.ExecResult, error) {
		return s.sb.Exec(ctx, p, fn)
	})
}

// guardedExec runs a command call (Exec, or Attach to a detached one) with
// its streamed output, its final output and its error passing the guard
// with the context's declared secrets.
func (s *guardedSandbox) guardedExec(ctx context.Context, out OutputFunc, run func(OutputFunc) (*agent.ExecResult, error)) (*agent.ExecResult, error) {
	sg := newStreamGuard(s.gctx(ctx), s.g, s.tenant, out)
	res, err := run(sg.fn())
	sg.flush()
	if err != nil {
		return nil, s.err(ctx, err)
	}
	c := *res
	c.Stdout = s.text(ctx, c.Stdout)
	c.Stderr = s.text(ctx, c.Stderr)
	return &c, nil
}

func (s *guardedSandbox) Signal(ctx context.Context, p agent.SignalParams) error {
	return s.err(ctx, s.sb.Signal(ctx, p))
}

func (s *guardedSandbox) Stdin(ctx context.Context, p agent.StdinParams) error {
	return s.err(ctx, s.sb.Stdin(ctx, p))
}

func (s *guardedSandbox) Processes(ctx context.Context) ([]agent.Process, error) {
	ps, err := s.sb.Processes(ctx)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	out := make([]agent.Process, len(ps))
	for i, p := range ps {
		p.Argv = slices.Clone(p.Argv)
		for j, a := range p.Argv {
			p.Argv[j] = s.text(ctx, a)
		}
		p.Cwd, p.Tag = s.text(ctx, p.Cwd), s.text(ctx, p.Tag)
		out[i] = p
	}
	return out, nil
}

func (s *guardedSandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	r, err := s.sb.ReadFile(ctx, p)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	c := *r
	fr := s.g.File(s.gctx(ctx), s.tenant)
	c.Data = append(fr.Write(r.Data), fr.Flush()...)
	return &c, nil
}

func (s *guardedSandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	fi, err := s.sb.WriteFile(ctx, p)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	s.info(ctx, fi)
	return fi, nil
}

func (s *guardedSandbox) EditFile(ctx context.Context, p agent.EditParams) (*agent.EditResult, error) {
	r, err := s.sb.EditFile(ctx, p)
	return r, s.err(ctx, err)
}

func (s *guardedSandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	fis, err := s.sb.List(ctx, p)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	out := slices.Clone(fis)
	for i := range out {
		s.info(ctx, &out[i])
	}
	return out, nil
}

func (s *guardedSandbox) Stat(ctx context.Context, path string) (*agent.FileInfo, error) {
	fi, err := s.sb.Stat(ctx, path)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	s.info(ctx, fi)
	return fi, nil
}

func (s *guardedSandbox) Mkdir(ctx context.Context, path string) (*agent.FileInfo, error) {
	fi, err := s.sb.Mkdir(ctx, path)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	s.info(ctx, fi)
	return fi, nil
}

func (s *guardedSandbox) Remove(ctx context.Context, p agent.RemoveParams) error {
	return s.err(ctx, s.sb.Remove(ctx, p))
}

func (s *guardedSandbox) Move(ctx context.Context, p agent.MoveParams) (*agent.FileInfo, error) {
	fi, err := s.sb.Move(ctx, p)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	s.info(ctx, fi)
	return fi, nil
}

func (s *guardedSandbox) Glob(ctx context.Context, p agent.GlobParams) (*agent.GlobResult, error) {
	r, err := s.sb.Glob(ctx, p)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	c := *r
	c.Paths = make([]string, len(r.Paths))
	for i, v := range r.Paths {
		c.Paths[i] = s.text(ctx, v)
	}
	return &c, nil
}

func (s *guardedSandbox) Grep(ctx context.Context, p agent.GrepParams) (*agent.GrepResult, error) {
	r, err := s.sb.Grep(ctx, p)
	if err != nil {
		return nil, s.err(ctx, err)
	}
	c := *r
	c.Matches = make([]agent.GrepMatch, len(r.Matches))
	for i, m := range r.Matches {
		m.Path, m.Text = s.text(ctx, m.Path), s.text(ctx, m.Text)
		c.Matches[i] = m
	}
	return &c, nil
}

// Close is a no-op: the Manager owns the connection.
func (s *guardedSandbox) Close() error { return nil }

// guardedError carries a redacted message and keeps the error's category
// (and context cancellation) for errors.Is, but not the original chain,
// whose text could hold unredacted output.
type guardedError struct {
	msg    string
	public string // the redacted errdefs.Explanation, if err had one
	cause  []error
}

func (e *guardedError) Error() string   { return e.msg }
func (e *guardedError) Unwrap() []error { return e.cause }

// PublicMessage keeps the sentence of the error it replaced
// (errdefs.PublicMessage), redacted like its text.
func (e *guardedError) PublicMessage() string { return e.public }

// guardError redacts err's message. Nil g or err returns err unchanged.
func guardError(ctx context.Context, g Guard, tenantID string, err error) error {
	if err == nil || g == nil {
		return err
	}
	ge := &guardedError{msg: g.Text(ctx, tenantID, err.Error())}
	if s, ok := errdefs.Explanation(err); ok {
		ge.public = g.Text(ctx, tenantID, s)
	}
	if errdefs.Categorized(err) {
		ge.cause = append(ge.cause, errdefs.FromCode(errdefs.CodeOf(err)))
	}
	for _, c := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, c) {
			ge.cause = append(ge.cause, c)
		}
	}
	if d, ok := errdefs.RetryAfter(err); ok {
		return errdefs.Retry(ge, d) // a state that passes stays one (Retry-After)
	}
	return ge
}

// guardRunResult returns a redacted copy of r.
func guardRunResult(ctx context.Context, g Guard, tenantID string, r *agent.RunCodeResult) *agent.RunCodeResult {
	if g == nil || r == nil {
		return r
	}
	t := func(s string) string {
		if s == "" {
			return s
		}
		return g.Text(ctx, tenantID, s)
	}
	c := *r
	c.Stdout, c.Stderr = t(r.Stdout), t(r.Stderr)
	if r.Results != nil {
		c.Results = make([]agent.RichResult, len(r.Results))
		for i := range r.Results {
			c.Results[i] = guardRich(ctx, g, tenantID, r.Results[i])
		}
	}
	if r.Error != nil {
		e := agent.ExecError{Name: t(r.Error.Name), Value: t(r.Error.Value), Traceback: t(r.Error.Traceback)}
		c.Error = &e
	}
	return &c
}

// guardRich redacts the text formats of a rich result and checks its
// images.
func guardRich(ctx context.Context, g Guard, tenantID string, r agent.RichResult) agent.RichResult {
	t := func(s string) string {
		if s == "" {
			return s
		}
		return g.Text(ctx, tenantID, s)
	}
	r.Text, r.HTML, r.Markdown = t(r.Text), t(r.HTML), t(r.Markdown)
	r.SVG, r.LaTeX, r.JavaScript = t(r.SVG), t(r.LaTeX), t(r.JavaScript)
	r.PNG = guardImage(ctx, g, tenantID, "png", r.PNG, &r.Text)
	r.JPEG = guardImage(ctx, g, tenantID, "jpeg", r.JPEG, &r.Text)
	r.JSON = guardJSON(r.JSON, t, false)
	r.Data = guardJSON(r.Data, t, false)
	r.Chart = guardJSON(r.Chart, t, true)
	return r
}

// guardJSON redacts a JSON document with t. The whole document goes
// through t first (one call; most documents come back unchanged). When t
// changes it, each string (keys included) and each integer is redacted on
// its own, so the document stays JSON of the same shape: a redacted
// integer becomes the redaction's string. Numbers with a fraction or an
// exponent are measurements (a column of floats) and pass: their digits
// are what the value prints as. With coords every number passes: a
// chart's numbers are its points and ticks (a log-scale chart's
// 6220781239412467 is a y value, no card number), while its labels and
// titles are text and redacted. Keys keep their order (a table's columns).
func guardJSON(doc json.RawMessage, t func(string) string, coords bool) json.RawMessage {
	if len(doc) == 0 {
		return doc
	}
	red := t(string(doc))
	if red == string(doc) {
		return doc
	}
	if out, err := guardJSONValues(doc, t, coords); err == nil {
		return out
	}
	if json.Valid([]byte(red)) {
		return json.RawMessage(red)
	}
	// Not JSON to begin with: return the redacted text as a JSON string.
	b, _ := json.Marshal(red)
	return b
}

// guardJSONValues rewrites doc token by token with its strings and
// integers (unless coords) passed through t.
func guardJSONValues(doc []byte, t func(string) string, coords bool) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out bytes.Buffer
	str := func(s string) {
		b, _ := json.Marshal(s)
		out.Write(b)
	}
	type frame struct {
		obj bool
		n   int // tokens written in this container
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			out.WriteByte(byte(d))
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			switch {
			case f.obj && f.n%2 == 1:
				out.WriteByte(':')
			case f.n > 0:
				out.WriteByte(',')
			}
			f.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(v))
			stack = append(stack, frame{obj: v == '{'})
		case string:
			str(t(v))
		case json.Number:
			s := v.String()
			if r := t(s); r != s && !coords && !strings.ContainsAny(s, ".eE") {
				str(r)
			} else {
				out.WriteString(s)
			}
		case bool:
			out.WriteString(strconv.FormatBool(v))
		case nil:
			out.WriteString("null")
		}
	}
	return out.Bytes(), nil
}

// guardImage passes a base64 image result through g.Image. An image that
// must not leave is dropped and its marker appended to text.
func guardImage(ctx context.Context, g Guard, tenantID, format, b64 string, text *string) string {
	if b64 == "" {
		return b64
	}
	data, err := base64.StdEncoding.DecodeString(strings.NewReplacer("\n", "", "\r", "").Replace(b64))
	if err != nil {
		data = []byte(b64) // not base64: g.Image judges the bytes as they are
	}
	out, marker := g.Image(ctx, tenantID, format, data)
	switch {
	case marker != "":
		if *text != "" {
			*text += "\n"
		}
		*text += marker
		return ""
	case err != nil || len(out) == len(data):
		return b64 // unchanged: Image only ever removes bytes
	}
	return base64.StdEncoding.EncodeToString(out)
}

// streamGuard redacts one call's streamed output: one StreamRedactor per
// stream, created on first use, flushed at the end of the call.
type streamGuard struct {
	ctx    context.Context
	g      Guard
	tenant string
	out    OutputFunc

	mu     sync.Mutex
	ref    uint64
	reds   map[string]StreamRedactor // by stream name
	keys   []string                  // streams in first-seen order
	idle   *time.Timer               // releases held-back text after IdleFlush of quiet
	closed bool                      // flushed at the end: nothing more is emitted
}

func newStreamGuard(ctx context.Context, g Guard, tenantID string, out OutputFunc) *streamGuard {
	return &streamGuard{ctx: ctx, g: g, tenant: tenantID, out: out} // reds made on the first output
}

// fn returns the OutputFunc to hand to the sandbox (nil when the caller
// wants no stream).
func (s *streamGuard) fn() OutputFunc {
	if s.out == nil {
		return nil
	}
	if s.g == nil {
		return s.out
	}
	return s.write
}

func (s *streamGuard) write(ev agent.OutputEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ref = ev.Ref
	switch {
	case ev.Result != nil:
		r := guardRich(s.ctx, s.g, s.tenant, *ev.Result)
		ev.Result = &r
	case ev.Data != "":
		red, ok := s.reds[ev.Stream]
		if !ok {
			red = s.g.Stream(s.ctx, s.tenant)
			if s.reds == nil {
				s.reds = map[string]StreamRedactor{}
			}
			s.reds[ev.Stream] = red
			s.keys = append(s.keys, ev.Stream)
		}
		ev.Data = red.Write(ev.Data)
		if _, ok := red.(IdleFlusher); ok {
			if s.idle == nil {
				s.idle = time.AfterFunc(IdleFlush, s.flushIdle)
			} else {
				s.idle.Reset(IdleFlush)
			}
		}
		if ev.Data == "" {
			return
		}
	}
	s.out(ev)
}

// flushIdle releases what the redactors hold back once the streams have
// been quiet for IdleFlush.
func (s *streamGuard) flushIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, k := range s.keys {
		if f, ok := s.reds[k].(IdleFlusher); ok {
			if rest := f.FlushIdle(); rest != "" {
				s.out(agent.OutputEvent{Ref: s.ref, Stream: k, Data: rest})
			}
		}
	}
}

// flush emits what the redactors held back.
func (s *streamGuard) flush() {
	if s.out == nil || s.g == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
	}
	for _, k := range s.keys {
		if rest := s.reds[k].Flush(); rest != "" {
			s.out(agent.OutputEvent{Ref: s.ref, Stream: k, Data: rest})
		}
	}
}
