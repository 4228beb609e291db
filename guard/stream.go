package guard

import (
	"bytes"
	"context"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/sandlot/sandlot/contexts"
)

const (
	// window is the tail held back between writes, longer than any
	// single-token secret we match except PEM blocks and long JWTs, which
	// the token and finding rules below hold back instead.
	window = 256
	// maxToken bounds how far the cut moves back to keep a token whole.
	maxToken = 4 << 10
	// maxHold bounds the held-back text; past it everything is emitted
	// (findings still redacted whole).
	maxHold = maxPEM
	// keep is how much already-emitted text stays as context for the next
	// scan (context words for SSNs and AWS secrets).
	keep = 64
)

// Stream implements contexts.Guard. The mode is fixed when the stream
// starts.
func (g *Guard) Stream(ctx context.Context, tenantID string) contexts.StreamRedactor {
	mode := g.ModeOf(ctx, tenantID)
	if mode == ModeOff {
		return passStream{}
	}
	// The redactor lives for one call; it keeps the call's ctx for the
	// Audit hook because the contexts.StreamRedactor contract has no ctx.
	return &stream{g: g, ctx: ctx, tenant: tenantID, mode: mode, sec: g.declaredOf(ctx, tenantID), ents: g.entsOf(ctx, tenantID)}
}

type passStream struct{}

func (passStream) Write(chunk string) string { return chunk }
func (passStream) Flush() string             { return "" }

// stream is one output stream's state. Not safe for concurrent use (one
// stream is written by one goroutine).
type stream struct {
	g      *Guard
	ctx    context.Context
	tenant string
	mode   string
	sec    *declared // the declared secret values of the call's context; nil: none
	ents   entitySet // the entity types the tenant's output is scanned for

	pending []byte // raw text not yet emitted (a buffer: tiny writes must not copy it)
	prev    string // the tail of emitted raw text, context for the next scan
	base    int    // stream offset of pending[0]
	next    int    // don't rescan before pending reaches this length
	inPEM   bool   // swallowing the rest of a private key block
	pemLine string // undecided text while inPEM; it starts at base

	// spans, when set, receives the stream range of each finding and of
	// each dropped piece of a private key block, and process builds no
	// output: the binary redactor masks those bytes in place.
	spans func(typ string, start, end int)
	// binary is set for the view of a binary format (scanBinary).
	binary bool
	// idle is set during FlushIdle: the start of a declared value at the
	// end stays held (a secret printed in two slow halves is still whole).
	idle bool
}

var _ contexts.StreamRedactor = (*stream)(nil)

// Write implements contexts.StreamRedactor.
func (st *stream) Write(chunk string) string {
	out := st.process(chunk, false)
	if st.mode == ModeReport {
		return chunk
	}
	return out
}

// Flush implements contexts.StreamRedactor.
func (st *stream) Flush() string {
	out := st.process("", true)
	if st.mode == ModeReport {
		return ""
	}
	return out
}

// FlushIdle implements contexts.IdleFlusher: the stream went quiet, so the
// held-back tail goes out, redacted as at the end of the stream. Text that
// may open a private key block ("-----") stays held until the block ends
// or the hold bound is reached, so a key printed slowly is still dropped
// whole. What follows is scanned with the released tail as context
// (prev), so a secret whose two halves straddle the pause is still
// redacted from the pause on.
func (st *stream) FlushIdle() string {
	if st.inPEM || bytes.Contains(st.pending, []byte("-----")) {
		return ""
	}
	st.idle = true
	defer func() { st.idle = false }()
	return st.Flush()
}

var _ contexts.IdleFlusher = (*stream)(nil)

func (st *stream) process(chunk string, final bool) string {
	var b strings.Builder
	if st.inPEM {
		chunk = st.skipPEM(chunk, final)
		if st.inPEM {
			return ""
		}
	}
	st.pending = append(st.pending, chunk...)
	// Scan when a window's worth is pending, or a line is complete (so
	// line-oriented output flows), but rescan held-back text only after it
	// grew by half, so a long hold (an open PEM block) costs O(n log n).
	if len(st.pending) == 0 || !final && (len(st.pending) < st.next && !st.endArrived(len(chunk)) ||
		len(st.pending) < 2*window && strings.IndexAny(chunk, "\n\r") < 0) {
		return ""
	}
	defer func() {
		st.next = 0
		if len(st.pending) > 2*window {
			st.next = len(st.pending) + len(st.pending)/2
		}
	}()
	view := st.prev + string(st.pending)
	off := len(st.prev)
	var fs []Finding
	if st.binary {
		fs = st.g.scanBinary(view)
	} else {
		fs = st.g.scanEnts(view, st.ents)
	}
	fs = withDeclared(fs, st.sec, view)
	cut := len(view)
	force := false
	if final && st.idle {
		if cut = st.sec.partial(view); cut < len(view) {
			for _, f := range fs {
				if f.Start < cut && f.End > cut {
					cut = f.Start
					break
				}
			}
			if cut <= off {
				return ""
			}
		}
	}
	if !final {
		cut = st.cut(view, off, fs)
		if cut <= off && len(st.pending) > maxHold {
			cut, force = forcedCut(view, fs), true
		}
		if cut <= off {
			return ""
		}
	}
	last := off
	for _, f := range fs {
		if f.End <= off || f.Start >= cut {
			continue
		}
		a := max(f.Start, off)
		if st.spans != nil {
			st.spans(f.Type, st.base+a-off, st.base+f.End-off)
		} else {
			b.WriteString(view[last:a])
			b.WriteString(Marker(f.Type))
		}
		last = f.End
		st.g.record(st.ctx, st.tenant, st.mode, Finding{Type: f.Type, Start: a - off, End: f.End - off, Confidence: f.Confidence}, view[f.Start:f.End], st.base)
		if force && openPEM(view, f) {
			st.inPEM = true
		}
	}
	if st.spans == nil {
		b.WriteString(view[last:cut])
	}
	st.base += cut - off
	st.pending = append(st.pending[:0], view[cut:]...)
	if st.inPEM {
		// skipPEM takes over from here: what is pending comes first.
		st.pemLine, st.pending = string(st.pending), st.pending[:0]
	}
	p := max(0, cut-keep)
	for p < cut && !utf8.RuneStart(view[p]) {
		p++
	}
	st.prev = view[p:cut]
	return b.String()
}

// forcedCut is the cut when the hold bound is hit: everything but an
// incomplete last rune, unless a finding covers it (findings go out whole).
func forcedCut(view string, fs []Finding) int {
	cut := len(view)
	for r := len(view) - 1; r >= 0 && r >= len(view)-utf8.UTFMax; r-- {
		if utf8.RuneStart(view[r]) {
			if !utf8.FullRuneInString(view[r:]) {
				cut = r
			}
			break
		}
	}
	for _, f := range fs {
		if f.Start < cut && f.End > cut {
			cut = f.End
		}
	}
	return cut
}

// endArrived reports whether the last n bytes of pending (and a few
// before, for a split marker) hold a PEM END marker.
func (st *stream) endArrived(n int) bool {
	return bytes.Contains(st.pending[max(0, len(st.pending)-n-8):], []byte("-----END"))
}

// cut picks where to stop emitting: window bytes before the end or after the
// last newline, whichever is later, moved back
// to the start of a token that straddles it and to the start of a finding
// that straddles it, at a normalization (and so UTF-8) boundary.
func (st *stream) cut(view string, off int, fs []Finding) int {
	cut := len(view) - window
	if nl := strings.LastIndexAny(view, "\n\r"); nl+1 > cut {
		cut = nl + 1 // no single-line value spans a line end; PEM blocks are findings
	}
	if cut <= off {
		return off
	}
	for w := cut; w > off && cut-w < maxToken; w-- {
		if isSpace(view[w-1]) {
			cut = w
			break
		}
	}
	// The start of a declared value at the end waits for the rest of it,
	// however the writes split it (a value may hold spaces and newlines).
	cut = min(cut, st.sec.partial(view))
	for _, f := range fs {
		if f.Start < cut && (f.End > cut || openPEM(view, f)) {
			cut = f.Start
			break
		}
	}
	if cut <= off {
		return off
	}
	if view[cut-1] == '\n' || view[cut-1] == '\r' {
		return cut // a line end never composes with what follows
	}
	if lb := norm.NFKC.LastBoundary([]byte(view[off:cut])); lb >= 0 {
		cut = off + lb
	} else {
		return off
	}
	return cut
}

// openPEM reports a private key block that has no END line yet and is
// followed by no complete line: more of its body, or its END line, may
// follow.
func openPEM(view string, f Finding) bool {
	return f.Type == TypePrivateKey && !strings.Contains(view[f.Start:f.End], "-----END") &&
		strings.IndexByte(strings.TrimLeft(view[f.End:], " \t\r\n"), '\n') < 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// drop advances the stream past n dropped bytes of a private key block.
func (st *stream) drop(n int) {
	if st.spans != nil && n > 0 {
		st.spans(TypePrivateKey, st.base, st.base+n)
	}
	st.base += n
}

// skipPEM drops the body and END line of a private key block whose BEGIN
// was already redacted, and returns what follows it. base is the stream
// offset of pemLine (then chunk), and advances over what is dropped.
func (st *stream) skipPEM(chunk string, final bool) string {
	buf := st.pemLine + chunk
	st.pemLine = ""
	for {
		// buf starts at a line, or at the newline that ended a dropped line
		lead := 0
		if strings.HasPrefix(buf, "\n") {
			lead = 1
		}
		nl := strings.IndexByte(buf[lead:], '\n')
		if nl < 0 {
			t := strings.TrimSpace(buf[lead:])
			body := t != "" && pemBodyLine(t) || strings.HasPrefix(t, "-----END")
			switch {
			case final && body:
				st.inPEM = false
				st.drop(len(buf))
				return ""
			case final:
				st.inPEM = false
				return buf
			case len(buf) > maxToken && body:
				// A long body line: drop what came of it so far; the rest
				// of the line is judged as a line of its own.
				st.drop(len(buf))
				buf = ""
			}
			st.pemLine = buf
			return ""
		}
		t := strings.TrimSpace(buf[lead : lead+nl])
		if strings.HasPrefix(t, "-----END") {
			st.inPEM = false
			st.drop(lead + nl)
			return buf[lead+nl:]
		}
		if t == "" || !pemBodyLine(t) {
			st.inPEM = false
			return buf
		}
		st.drop(lead + nl)
		buf = buf[lead+nl:]
	}
}

func pemBodyLine(t string) bool {
	for i := 0; i < len(t); i++ {
		if !is(t[i], cAlnum) && t[i] != '+' && t[i] != '/' && t[i] != '=' {
			return false
		}
	}
	return true
}
