package server

import (
	"encoding/json"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/sandlot/sandlot/agent"
)

// appendResult appends the JSON of a call's result to dst. A run_code
// result is written by hand when it holds no raw JSON (a chart's, a
// table's: the rare case), which keeps reflection off the warm round trip
// (encoding/json was a tenth of the agent's CPU there); anything else goes
// through encoding/json. Both give the same value to a decoder.
func appendResult(dst []byte, res any) ([]byte, error) {
	if r, ok := res.(*agent.RunCodeResult); ok && plainRunCode(r) {
		return appendRunCode(dst, r), nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// pingVersion is agent.Version as encoding/json writes it.
var pingVersion, _ = json.Marshal(agent.Version)

// agentPID is this process's id, which a ping's answer carries: read once,
// not by a system call per ping (one rides on every warm call).
var agentPID = os.Getpid()

// appendPingReply appends the response to ping id as reply writes an
// agent.PingResult through encoding/json, by hand: the ping that rides on
// a warm call is answered before its request is dispatched.
func appendPingReply(b []byte, id uint64, uptimeMs int64, pid int) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"result":{"version":`...)
	b = append(b, pingVersion...)
	b = append(b, `,"uptimeMs":`...)
	b = strconv.AppendInt(b, uptimeMs, 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	return append(b, "}}\n"...)
}

// plainRunCode reports a result appendRunCode writes: no raw JSON.
func plainRunCode(r *agent.RunCodeResult) bool {
	for i := range r.Results {
		if x := &r.Results[i]; len(x.JSON) > 0 || len(x.Data) > 0 || len(x.Chart) > 0 {
			return false
		}
	}
	return true
}

// appendRunCode writes r as encoding/json would, field for field (the
// struct tags' names, order and omitempty).
func appendRunCode(b []byte, r *agent.RunCodeResult) []byte {
	b = append(b, `{"success":`...)
	b = strconv.AppendBool(b, r.Success)
	b = append(b, `,"stdout":`...)
	b = appendString(b, r.Stdout)
	b = append(b, `,"stderr":`...)
	b = appendString(b, r.Stderr)
	if len(r.Results) > 0 {
		b = append(b, `,"results":[`...)
		for i := range r.Results {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRich(b, &r.Results[i])
		}
		b = append(b, ']')
	}
	if e := r.Error; e != nil {
		b = append(b, `,"error":{"name":`...)
		b = appendString(b, e.Name)
		b = append(b, `,"value":`...)
		b = appendString(b, e.Value)
		b = append(b, `,"traceback":`...)
		b = appendString(b, e.Traceback)
		b = append(b, '}')
	}
	b = append(b, `,"exitCode":`...)
	b = strconv.AppendInt(b, int64(r.ExitCode), 10)
	if r.TimedOut {
		b = append(b, `,"timedOut":true`...)
	}
	if r.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, `,"executionCount":`...)
	b = strconv.AppendInt(b, int64(r.ExecutionCount), 10)
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendInt(b, r.DurationMs, 10)
	if r.KernelRestarted {
		b = append(b, `,"kernelRestarted":true`...)
	}
	return append(b, '}')
}

// appendRich writes one rich result without raw JSON (plainRunCode).
func appendRich(b []byte, x *agent.RichResult) []byte {
	b = append(b, '{')
	n := len(b)
	field := func(name, v string) {
		if v == "" {
			return
		}
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b = appendString(b, v)
	}
	if x.Main {
		b = append(b, `"main":true`...)
	}
	field("text", x.Text)
	field("html", x.HTML)
	field("markdown", x.Markdown)
	field("svg", x.SVG)
	field("png", x.PNG)
	field("jpeg", x.JPEG)
	field("latex", x.LaTeX)
	field("javascript", x.JavaScript)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does; a JSON text is UTF-8).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
