package tools

import (
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

//go:embed analysis/*.py
var analysisFS embed.FS

// AnalysisResult is the result of run_analysis.
type AnalysisResult struct {
	api.PathRef
	Success      bool   `json:"success"`
	AnalysisType string `json:"analysisType"`
	OutputFormat string `json:"outputFormat"`
	// Builtin is set when a built-in program ran (code omitted).
	Builtin  bool   `json:"builtin"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exitCode"`
	// Result is the value of the program's last expression (its JSON
	// when the kernel provides it, else its text), or null.
	Result any `json:"result"`
	// ParsedOutput is stdout parsed as OutputFormat: json gives the
	// value, csv an array of objects keyed by the header row (values are
	// strings), text the trimmed text. It is null when the run failed or
	// the output did not parse; ParseError then says why.
	ParsedOutput    any            `json:"parsedOutput"`
	ParseError      string         `json:"parseError,omitempty"`
	Error           *api.ExecError `json:"error,omitempty"`
	TimedOut        bool           `json:"timedOut,omitempty"`
	ExecutionTimeMs int64          `json:"executionTimeMs"`
	SandboxID       string         `json:"sandboxId"`
	Truncated       bool           `json:"truncated"`
	// OutputType is error when the run failed, else what stdout looks
	// like (json, table, text).
	OutputType string `json:"outputType"`
	// Rotated, StateLost and Notice say what happened to the sandbox's
	// state, as in run_code's result (api.RunCodeResult).
	Rotated   bool   `json:"rotated,omitempty"`
	StateLost bool   `json:"stateLost,omitempty"`
	Notice    string `json:"notice,omitempty"`
}

// AnalysisProgram returns the python program run_analysis runs for a
// built-in analysis type with the given parameters and output format
// (exported for tests and for callers that want to show the code).
func AnalysisProgram(analysisType string, params json.RawMessage, outputFormat string) (string, error) {
	return program(analysisType, paramsPrelude(agent.Python, params, outputFormat))
}

// program is the built-in program of analysisType after prelude.
func program(analysisType, prelude string) (string, error) {
	body, err := analysisFS.ReadFile("analysis/" + analysisType + ".py")
	if err != nil {
		return "", fmt.Errorf("run_analysis: no built-in program for %s: %w", analysisType, errdefs.ErrInvalidArgument)
	}
	emit, err := analysisFS.ReadFile("analysis/emit.py")
	if err != nil {
		return "", fmt.Errorf("run_analysis: emit.py: %w", err)
	}
	var b strings.Builder
	b.WriteString(prelude)
	b.Write(emit)
	b.WriteString("\n")
	b.Write(body)
	// Run in a try so the helpers never stay in the user's kernel namespace.
	b.WriteString("\ntry:\n    _sandlot_emit(_sandlot_run(params), output_format)\nfinally:\n    del _sandlot_run, _sandlot_emit\n")
	return b.String(), nil
}

// paramsPrelude defines params and output_format for code in language.
// The JSON travels base64-encoded so no quoting of user data can break out
// of the literal. JavaScript uses globalThis so that a persistent kernel
// accepts the prelude twice.
func paramsPrelude(language string, params json.RawMessage, outputFormat string) string {
	enc := base64.StdEncoding.EncodeToString(params)
	if language == agent.JavaScript {
		return fmt.Sprintf("globalThis.params = JSON.parse(Buffer.from(%q, 'base64').toString('utf8'));\nglobalThis.output_format = %q;\n", enc, outputFormat)
	}
	return fmt.Sprintf("import json as _sandlot_json, base64 as _sandlot_b64\nparams = _sandlot_json.loads(_sandlot_b64.b64decode(%q).decode('utf-8'))\noutput_format = %q\ndel _sandlot_json, _sandlot_b64\n", enc, outputFormat)
}

// inlineParamsMax is the largest parameters document inlined in the code;
// bigger ones (data_analysis rows) travel as a file, so the code stays
// under the manager's code size limit (100 KiB by default).
const inlineParamsMax = 16 << 10

// paramsFilePrelude loads params from a file in the sandbox and removes it.
func paramsFilePrelude(path, outputFormat string) string {
	return fmt.Sprintf("import json as _sandlot_json, os as _sandlot_os\nwith open(%q, encoding='utf-8') as _sandlot_f:\n    params = _sandlot_json.load(_sandlot_f)\n_sandlot_os.remove(%q)\noutput_format = %q\ndel _sandlot_json, _sandlot_os, _sandlot_f\n", path, path, outputFormat)
}

// prelude defines params for code in lang, through a file when they are
// large and the language is python. stateLost reports that the write of
// that file was the call that met a replaced lost sandbox
// (contexts.StateLost): the run that follows must say so.
func (r *Registry) prelude(ctx context.Context, call Call, lang string, params json.RawMessage, format string) (code string, stateLost bool, err error) {
	if lang != agent.Python || len(params) <= inlineParamsMax {
		return paramsPrelude(lang, params, format), false, nil
	}
	path := "/tmp/.sandlot-params-" + uuid.NewString() + ".json"
	err = r.c.Use(ctx, call.Identity, r.create(call), func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		stateLost = contexts.StateLost(ctx)
		_, err := writeAll(ctx, sb, path, params, 0o600)
		return err
	})
	if err != nil {
		return "", false, fmt.Errorf("run_analysis: pass parameters: %w", lost(err))
	}
	return paramsFilePrelude(path, format), stateLost, nil
}

func (r *Registry) runAnalysis(ctx context.Context, call Call, args map[string]any, out contexts.OutputFunc) (any, error) {
	env, err := callEnv(ctx, "run_analysis", args)
	if err != nil {
		return nil, err
	}
	typ := str(args, "analysisType")
	format := str(args, "outputFormat")
	if format == "" {
		format = "json"
	}
	lang := str(args, "language")
	if lang == "" {
		lang = agent.Python
	}
	// The raw parameters, not the decoded map: object key order matters
	// (column order in data_analysis) and maps would sort it.
	var raw struct {
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(call.Args, &raw); err != nil {
		return nil, fmt.Errorf("run_analysis: parameters: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	params := raw.Parameters
	code := str(args, "code")
	builtin := code == ""
	if builtin {
		if typ == "custom" {
			return nil, fmt.Errorf("run_analysis: analysisType custom requires code: %w", errdefs.ErrInvalidArgument)
		}
		if lang != agent.Python {
			return nil, fmt.Errorf("run_analysis: the built-in %s program is python; language %s needs code: %w", typ, lang, errdefs.ErrInvalidArgument)
		}
	}
	prelude, lostBefore, err := r.prelude(ctx, call, lang, params, format)
	if err != nil {
		return nil, err
	}
	if builtin {
		if code, err = program(typ, prelude); err != nil {
			return nil, err
		}
	} else {
		code = prelude + code
	}
	req := contexts.ExecuteRequest{Env: env, Language: lang, Code: code, Timeout: time.Duration(integer(args, "timeout")) * time.Millisecond, Network: r.create(call).Network}
	res, err := r.c.Execute(ctx, call.Identity, req, out)
	if err != nil {
		return nil, fmt.Errorf("run_analysis: %w", err)
	}
	noteSandbox(ctx, res.SandboxID)
	cr := r.codeResult(res)
	ar := &AnalysisResult{
		Success:         cr.Success,
		AnalysisType:    typ,
		OutputFormat:    format,
		Builtin:         builtin,
		Stdout:          cr.Stdout,
		Stderr:          cr.Stderr,
		ExitCode:        cr.ExitCode,
		Error:           cr.Error,
		TimedOut:        cr.TimedOut,
		ExecutionTimeMs: cr.ExecutionTimeMs,
		SandboxID:       cr.SandboxID,
		Truncated:       cr.Truncated,
		OutputType:      cr.OutputType,
		Rotated:         cr.Rotated,
		StateLost:       cr.StateLost || lostBefore,
		Notice:          notice(cr.StateLost || lostBefore, cr.Rotated),
		Result:          mainValue(cr.Results),
	}
	if ar.Success {
		switch {
		case res.Truncated || len(res.Stdout) > r.cfg.MaxOutput && cr.Stdout != res.Stdout:
			ar.ParseError = fmt.Sprintf("output was truncated (over %d characters); it cannot be parsed as %s", r.cfg.MaxOutput, format)
		case format == "text":
			ar.ParsedOutput = strings.TrimSpace(res.Stdout)
		default:
			ar.ParsedOutput, ar.ParseError = parseOutput(format, res.Stdout)
		}
	}
	return ar, nil
}

// mainValue returns the last expression's value: its JSON when present,
// else its text.
func mainValue(results []api.RichResult) any {
	for _, rr := range results {
		if !rr.Main {
			continue
		}
		if len(rr.JSON) > 0 {
			var v any
			if json.Unmarshal(rr.JSON, &v) == nil {
				return v
			}
		}
		if rr.Text != "" {
			return rr.Text
		}
	}
	return nil
}
