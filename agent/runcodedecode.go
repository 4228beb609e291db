package agent

// A run_code result read without reflection. The agent writes a plain
// run_code result in one fixed layout (agent/server's appendRunCode: the
// struct's fields in their order, omitempty as encoding/json applies it),
// and decoding it was a tenth of the daemon's CPU on the warm round trip.
// The frame comes from inside the sandbox, so it is hostile input: the
// fast path accepts only that exact layout with plain numbers and strings
// it can decode exactly as encoding/json would, and leaves anything else
// (other spacing or order, raw JSON results, surrogate escapes, invalid
// UTF-8, big or non-integer numbers) to encoding/json, which stays the
// reference. FuzzRunCodeFrame holds the two to the same result. Nothing
// here allocates more than the frame's length (itself at most MaxFrame).

import (
	"bytes"
	"unicode/utf8"
)

// decodeRunCodeFrame decodes line, a response frame for call id, into
// dst when it is in the agent's own layout, and reports whether it did.
// On false dst is untouched and the caller decodes line with
// encoding/json.
func decodeRunCodeFrame(line []byte, id uint64, dst *RunCodeResult) bool {
	got, ok := resultHead(line)
	if !ok || got != id {
		return false
	}
	if d := line[len(respHead):]; d[0] == '0' && d[1] != ',' {
		return false // a leading zero: not JSON
	}
	i := bytes.Index(line, resultKey)
	if i < 0 {
		return false
	}
	p := rcParser{b: line, i: i + len(resultKey)}
	var r RunCodeResult
	if !p.runCode(&r) || !p.lit(`}`) || p.i != len(p.b) {
		return false
	}
	*dst = r
	return true
}

// rcParser reads b from i; every method reports false on anything it
// does not take.
type rcParser struct {
	b []byte
	i int
}

// lit consumes s.
func (p *rcParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

func (p *rcParser) boolean(v *bool) bool {
	switch {
	case p.lit("true"):
		*v = true
	case p.lit("false"):
		*v = false
	default:
		return false
	}
	return true
}

// integer reads -?(0|[1-9][0-9]*) of at most 18 digits (no overflow),
// not followed by a fraction or an exponent.
func (p *rcParser) integer(v *int64) bool {
	neg := p.lit("-")
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if p.i-start == 18 {
			return false
		}
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || (digits > 1 && p.b[start] == '0') {
		return false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return false
	}
	if neg {
		n = -n
	}
	*v = n
	return true
}

func (p *rcParser) int(v *int) bool {
	var n int64
	if !p.integer(&n) {
		return false
	}
	*v = int(n)
	return true
}

// str reads a JSON string: raw bytes that are valid UTF-8 and not control
// characters, and the escapes \" \\ \/ \b \f \n \r \t \uXXXX outside the
// surrogates (a surrogate pair, or a lone one that encoding/json turns
// into U+FFFD, is left to it).
func (p *rcParser) str(v *string) bool {
	if !p.lit(`"`) {
		return false
	}
	start := p.i
	var buf []byte // only when the string has an escape
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			if buf == nil {
				*v = string(p.b[start:p.i])
			} else {
				*v = string(append(buf, p.b[start:p.i]...))
			}
			p.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return false
			}
			buf = append(buf, p.b[start:p.i]...)
			e := p.b[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(p.b[p.i:])
				if !ok || (r >= 0xD800 && r <= 0xDFFF) {
					return false
				}
				buf = utf8.AppendRune(buf, r)
				p.i += 4
			default:
				return false
			}
			start = p.i
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				return false // encoding/json would write U+FFFD
			}
			p.i += size
		}
	}
	return false
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// runCode reads a RunCodeResult in appendRunCode's layout.
func (p *rcParser) runCode(r *RunCodeResult) bool {
	if !p.lit(`{"success":`) || !p.boolean(&r.Success) ||
		!p.lit(`,"stdout":`) || !p.str(&r.Stdout) ||
		!p.lit(`,"stderr":`) || !p.str(&r.Stderr) {
		return false
	}
	if p.lit(`,"results":[`) {
		for {
			r.Results = append(r.Results, RichResult{})
			if !p.rich(&r.Results[len(r.Results)-1]) {
				return false
			}
			if p.lit(`]`) {
				break
			}
			if !p.lit(`,`) {
				return false
			}
		}
	}
	if p.lit(`,"error":{"name":`) {
		e := &ExecError{}
		if !p.str(&e.Name) || !p.lit(`,"value":`) || !p.str(&e.Value) ||
			!p.lit(`,"traceback":`) || !p.str(&e.Traceback) || !p.lit(`}`) {
			return false
		}
		r.Error = e
	}
	if !p.lit(`,"exitCode":`) || !p.int(&r.ExitCode) {
		return false
	}
	r.TimedOut = p.lit(`,"timedOut":true`)
	r.Truncated = p.lit(`,"truncated":true`)
	if !p.lit(`,"executionCount":`) || !p.int(&r.ExecutionCount) ||
		!p.lit(`,"durationMs":`) || !p.integer(&r.DurationMs) {
		return false
	}
	r.KernelRestarted = p.lit(`,"kernelRestarted":true`)
	return p.lit(`}`)
}

// richFields are a RichResult's string fields in appendRich's order.
var richFields = [...]struct {
	key string
	at  func(*RichResult) *string
}{
	{`"text":`, func(x *RichResult) *string { return &x.Text }},
	{`"html":`, func(x *RichResult) *string { return &x.HTML }},
	{`"markdown":`, func(x *RichResult) *string { return &x.Markdown }},
	{`"svg":`, func(x *RichResult) *string { return &x.SVG }},
	{`"png":`, func(x *RichResult) *string { return &x.PNG }},
	{`"jpeg":`, func(x *RichResult) *string { return &x.JPEG }},
	{`"latex":`, func(x *RichResult) *string { return &x.LaTeX }},
	{`"javascript":`, func(x *RichResult) *string { return &x.JavaScript }},
}

// rich reads one RichResult in appendRich's layout: main when true, then
// the non-empty strings in order, and no raw JSON.
func (p *rcParser) rich(x *RichResult) bool {
	if !p.lit(`{`) {
		return false
	}
	n := 0
	if p.lit(`"main":true`) {
		x.Main = true
		n++
	}
	for _, f := range richFields {
		save := p.i
		if n > 0 && !p.lit(`,`) {
			continue
		}
		if !p.lit(f.key) {
			p.i = save
			continue
		}
		if !p.str(f.at(x)) || *f.at(x) == "" {
			return false // omitempty never writes ""; leave it to encoding/json
		}
		n++
	}
	return p.lit(`}`)
}
