package kernels

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/agent"
)

// encodeCommand is what the agent writes to a kernel for one run: the
// command each driver reads (JSON lines for python and node, NUL-separated
// for bash, framed for R and Java).
func encodeCommand(lang string, id int64, n int, code string, env map[string]string, ipython bool) ([]byte, error) {
	if lang == agent.R || lang == agent.Java {
		return encodeFramed(id, n, code, env), nil
	}
	if lang == agent.Bash {
		code = strings.ReplaceAll(code, "\x00", "")
		var b strings.Builder
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteByte(0)
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		// env is for this run only: each name's old value (or its absence)
		// is kept and restored after the run. Names are checked by Run.
		var after strings.Builder
		for _, k := range keys {
			b.WriteString("if [[ -v " + k + " ]]; then __sandlot_old_" + k + "=$" + k + "; __sandlot_had_" + k + "=1; else builtin unset __sandlot_had_" + k + "; fi\n")
			b.WriteString("builtin export " + k + "=" + shellQuote(strings.ReplaceAll(env[k], "\x00", "")) + "\n")
			after.WriteString("if [[ -n ${__sandlot_had_" + k + "-} ]]; then builtin export " + k + "=\"$__sandlot_old_" + k + "\"; else builtin unset " + k + "; fi; builtin unset __sandlot_had_" + k + " __sandlot_old_" + k + "\n")
		}
		b.WriteString(code)
		b.WriteByte(0)
		b.WriteString(after.String())
		b.WriteByte(0)
		return []byte(b.String()), nil
	}
	b, err := json.Marshal(struct {
		ID   int64             `json:"id"`
		N    int               `json:"n"`
		Code string            `json:"code"`
		Env  map[string]string `json:"env,omitempty"`
		IPy  bool              `json:"ipython,omitempty"`
	}{id, n, code, env, ipython && lang == agent.Python})
	if err != nil {
		return nil, invalid("encode: %v", err)
	}
	return append(b, '\n'), nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// interruptTag is the line the agent writes to python's command pipe, after
// the cell of run id, just before it sends that run SIGINT. The driver keeps
// an interrupt that comes before the cell's code runs and raises it as the
// code starts only when the cell's tag is there: an interrupt meant for an
// earlier run (which ended first) or one the agent did not send is dropped
// as before. A tag the driver did not take is skipped as the next line.
func interruptTag(id int64) []byte {
	return []byte(`{"interrupt":` + strconv.FormatInt(id, 10) + "}\n")
}

// startedLine is the line a kernel that reports its cell's start (R)
// writes on its result pipe as the cell's code starts (waitSpec.started).
func startedLine(id int64) []byte {
	return []byte(`{"started":` + strconv.FormatInt(id, 10) + "}\n")
}
