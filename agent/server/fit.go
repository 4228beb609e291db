package server

import (
	"encoding/json"

	"github.com/sandlot/sandlot/agent"
)

// frameBudget leaves room for the envelope of a response frame.
const frameBudget = agent.MaxFrame - 4096

// fitRunCode shrinks r until its JSON fits one frame: JSON escaping can
// grow binary output up to six times, and rich results can be large.
func fitRunCode(r *agent.RunCodeResult) {
	// Cheap bound first: escaping grows a byte to at most 6.
	n := len(r.Stdout) + len(r.Stderr)
	if r.Error != nil {
		n += len(r.Error.Name) + len(r.Error.Value) + len(r.Error.Traceback)
	}
	for i := range r.Results {
		n += len(r.Results[i].JSON) + len(r.Results[i].Data) + richLen(&r.Results[i])
	}
	if 6*n+64*len(r.Results) < frameBudget-1024 {
		return
	}
	for i := 0; i < 8; i++ {
		b, err := json.Marshal(r)
		if err != nil || len(b) <= frameBudget {
			return
		}
		r.Truncated = true
		// Drop the biggest rich payloads first, then halve the streams.
		biggest, size := -1, 0
		for j := range r.Results {
			if n := len(r.Results[j].PNG) + len(r.Results[j].JPEG) + len(r.Results[j].HTML) + len(r.Results[j].SVG) + len(r.Results[j].Text) + len(r.Results[j].Data); n > size {
				biggest, size = j, n
			}
		}
		if biggest >= 0 && size > frameBudget/4 {
			rr := &r.Results[biggest]
			*rr = agent.RichResult{Main: rr.Main, Text: cut(rr.Text, 4096) + " [result too large]"}
			continue
		}
		r.Stdout = cut(r.Stdout, len(r.Stdout)/2)
		r.Stderr = cut(r.Stderr, len(r.Stderr)/2)
		if r.Error != nil {
			r.Error.Traceback = cut(r.Error.Traceback, len(r.Error.Traceback)/2)
			r.Error.Value = cut(r.Error.Value, len(r.Error.Value)/2)
		}
	}
}

func richLen(r *agent.RichResult) int {
	return len(r.Text) + len(r.HTML) + len(r.Markdown) + len(r.SVG) + len(r.PNG) + len(r.JPEG) + len(r.LaTeX) + len(r.JavaScript)
}

func fitExec(r *agent.ExecResult) {
	if 6*(len(r.Stdout)+len(r.Stderr)) < frameBudget-1024 {
		return
	}
	for i := 0; i < 8; i++ {
		b, err := json.Marshal(r)
		if err != nil || len(b) <= frameBudget {
			return
		}
		r.Truncated = true
		r.Stdout = cut(r.Stdout, len(r.Stdout)/2)
		r.Stderr = cut(r.Stderr, len(r.Stderr)/2)
	}
}

// cut returns at most n bytes of s without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
