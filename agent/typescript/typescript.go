// Package typescript turns a TypeScript cell into the JavaScript the
// agent's typescript kernel runs. It runs on the host, before a cell
// reaches the agent: the transpiler (esbuild) is most of what the agent
// binary would otherwise link, and its weight was paid at every sandbox's
// start. The agent binary must not import this package (its deps test
// forbids esbuild).
package typescript

import (
	"context"
	"fmt"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/sandlot/sandlot/agent"
)

// ErrorName is the error name of a cell that does not transpile.
const ErrorName = "TypeScriptError"

// Transpile turns TypeScript into JavaScript that keeps top-level await and
// the last expression statement (so the kernel can report its value).
func Transpile(code string) (string, error) {
	r := api.Transform(code, api.TransformOptions{
		Loader:     api.LoaderTS,
		Target:     api.ESNext,
		Sourcefile: "cell.ts",
	})
	if len(r.Errors) > 0 {
		msgs := api.FormatMessages(r.Errors, api.FormatMessagesOptions{Kind: api.ErrorMessage})
		return "", fmt.Errorf("%s", strings.TrimSpace(strings.Join(msgs, "\n")))
	}
	return string(r.Code), nil
}

// Runner runs a cell in a sandbox (an *agent.Client).
type Runner interface {
	RunCode(ctx context.Context, p agent.RunCodeParams, out func(agent.OutputEvent)) (*agent.RunCodeResult, error)
}

// RunCode runs p on r, a TypeScript cell transpiled first. A cell that
// does not transpile never reaches the sandbox: it fails as a run does,
// with a TypeScriptError and no output.
func RunCode(ctx context.Context, r Runner, p agent.RunCodeParams, out func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	if p.Language == agent.TypeScript {
		js, err := Transpile(p.Code)
		if err != nil {
			return &agent.RunCodeResult{Error: &agent.ExecError{Name: ErrorName, Value: err.Error(), Traceback: err.Error()}}, nil
		}
		p.Code = js
	}
	return r.RunCode(ctx, p, out)
}
