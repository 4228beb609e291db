package typescript

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

type recorder struct{ got []agent.RunCodeParams }

func (r *recorder) RunCode(_ context.Context, p agent.RunCodeParams, _ func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	r.got = append(r.got, p)
	return &agent.RunCodeResult{Success: true}, nil
}

// TestRunCode: a TypeScript cell reaches the sandbox as JavaScript that
// keeps top-level await and its last expression; other languages pass
// untouched; a cell that does not transpile never reaches the sandbox.
func TestRunCode(t *testing.T) {
	var r recorder
	ctx := context.Background()
	res, err := RunCode(ctx, &r, agent.RunCodeParams{Language: agent.TypeScript, Code: "interface P { n: number }\nconst p: P = { n: await Promise.resolve(41) };\np.n + 1"}, nil)
	if err != nil || !res.Success || len(r.got) != 1 {
		t.Fatalf("run: %+v %v %+v", res, err, r.got)
	}
	js := r.got[0].Code
	if strings.Contains(js, "interface") || strings.Contains(js, ": P") || !strings.Contains(js, "await Promise.resolve(41)") || !strings.Contains(js, "p.n + 1;") {
		t.Fatalf("transpiled cell:\n%s", js)
	}
	if r.got[0].Language != agent.TypeScript {
		t.Fatalf("language = %q, want typescript: the host changes the code, not the language", r.got[0].Language)
	}
	if _, err := RunCode(ctx, &r, agent.RunCodeParams{Language: agent.JavaScript, Code: "const x: number = 1"}, nil); err != nil || r.got[1].Code != "const x: number = 1" {
		t.Fatalf("javascript was changed: %q %v", r.got[1].Code, err)
	}
	res, err = RunCode(ctx, &r, agent.RunCodeParams{Language: agent.TypeScript, Code: "const bad: number = ;"}, nil)
	if err != nil || res.Success || res.Error == nil || res.Error.Name != ErrorName || !strings.Contains(res.Error.Value, "Unexpected") {
		t.Fatalf("bad cell: %+v %v", res, err)
	}
	if len(r.got) != 2 {
		t.Fatalf("a cell that does not transpile reached the sandbox: %+v", r.got[2:])
	}
}
