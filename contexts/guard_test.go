package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
)

func TestGuardOnExecute(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		for _, chunk := range []string{"key=sk-SE", "CRET\n"} {
			out(agent.OutputEvent{Stream: agent.Stdout, Data: chunk})
		}
		out(agent.OutputEvent{Stream: agent.Stderr, Data: "warn sk-SECRET"})
		rich := agent.RichResult{Main: true, Text: "'sk-SECRET'", HTML: "<b>sk-SECRET</b>", Markdown: "sk-SECRET",
			JSON: []byte(`{"k":"sk-SECRET"}`), PNG: "c2stU0VDUkVU"}
		out(agent.OutputEvent{Stream: agent.Result, Result: &rich})
		return &agent.RunCodeResult{
			Stdout: "key=sk-SECRET\n", Stderr: "warn sk-SECRET", Results: []agent.RichResult{rich},
			Error: &agent.ExecError{Name: "ValueError", Value: "bad sk-SECRET", Traceback: "line 1: sk-SECRET"},
		}, nil
	}
	var mu sync.Mutex
	streams := map[string]string{}
	res, err := e.m.Execute(e.ctx, ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: "leak()"},
		func(ev agent.OutputEvent) {
			mu.Lock()
			defer mu.Unlock()
			streams[ev.Stream] += ev.Data
			if ev.Result != nil {
				streams[ev.Stream] += ev.Result.Text + ev.Result.HTML + ev.Result.Markdown + string(ev.Result.JSON)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		agent.Stdout: "key=[REDACTED]\n",
		agent.Stderr: "warn [REDACTED]",
		// The PNG (base64 of the secret) is no image for the guard: it
		// is dropped and its marker joins the text.
		agent.Result: "'[REDACTED]'\n[REDACTED]" + `<b>[REDACTED]</b>[REDACTED]{"k":"[REDACTED]"}`,
	}
	if diff := cmp.Diff(want, streams); diff != "" {
		t.Fatalf("streamed output (-want +got):\n%s", diff)
	}
	r := res.Results[0]
	final := res.Stdout + res.Stderr + r.Text + r.HTML + r.Markdown + string(r.JSON) + res.Error.Value + res.Error.Traceback
	if strings.Contains(final, "sk-SECRET") {
		t.Fatalf("result not guarded: %+v", res)
	}
	if string(r.JSON) != `{"k":"[REDACTED]"}` || r.PNG != "" || r.Text != "'[REDACTED]'\n[REDACTED]" {
		t.Fatalf("rich result = %+v", r)
	}
}

func TestGuardOnUse(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	id := ident("t1", "c1", "main")
	var used *contexts.Record
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		used = rec
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := sb.WriteFile(ctx, agent.WriteParams{Path: "notes.txt", Data: []byte("token sk-SECRET\nline2")})
		must(err)
		_, err = sb.WriteFile(ctx, agent.WriteParams{Path: "blob.bin", Data: []byte("sk-SECRET\x00\xff\xfe")})
		must(err)
		_, err = sb.WriteFile(ctx, agent.WriteParams{Path: "sk-SECRET.txt", Data: []byte("x")})
		must(err)

		rr, err := sb.ReadFile(ctx, agent.ReadParams{Path: "notes.txt"})
		must(err)
		if string(rr.Data) != "token [REDACTED]\nline2" {
			t.Errorf("text file = %q", rr.Data)
		}
		// Bytes that are not UTF-8 do not make a file binary.
		rr, err = sb.ReadFile(ctx, agent.ReadParams{Path: "blob.bin"})
		must(err)
		if string(rr.Data) != "[REDACTED]\x00\xff\xfe" {
			t.Errorf("text with odd bytes = %q", rr.Data)
		}
		var streamed strings.Builder
		xr, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo sk-SECRET"}, func(ev agent.OutputEvent) { streamed.WriteString(ev.Data) })
		must(err)
		if strings.Contains(xr.Stdout+streamed.String(), "sk-SECRET") {
			t.Errorf("exec output not guarded: %q %q", xr.Stdout, streamed.String())
		}
		gr, err := sb.Grep(ctx, agent.GrepParams{Pattern: "token"})
		must(err)
		if len(gr.Matches) != 1 || gr.Matches[0].Text != "token [REDACTED]" {
			t.Errorf("grep = %+v", gr)
		}
		ls, err := sb.List(ctx, agent.ListParams{Path: "/home/user"})
		must(err)
		for _, fi := range ls {
			if strings.Contains(fi.Name+fi.Path, "sk-SECRET") {
				t.Errorf("listing leaks: %+v", fi)
			}
		}
		_, err = sb.ReadFile(ctx, agent.ReadParams{Path: "missing-sk-SECRET"})
		if !errors.Is(err, errdefs.ErrNotFound) || strings.Contains(err.Error(), "sk-SECRET") {
			t.Errorf("error = %v: want not_found, guarded", err)
		}
		return sb.Close() // a no-op for the wrapper
	})
	if err != nil {
		t.Fatal(err)
	}
	// The context survived the callback's Close.
	if rec := e.getOrCreate(id); rec.ID != used.ID {
		t.Fatal("Use's Close ended the context")
	}
	if res := e.exec(id, "print('ok')"); res.Stdout != "ok\n" {
		t.Fatalf("after Use: %+v", res)
	}
}

func TestGuardBytesAtChunkEdges(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	text := "é sk-SECRET ü" // multi-byte characters at both ends
	e.m.Use(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		sb.WriteFile(ctx, agent.WriteParams{Path: "u.txt", Data: []byte(text)})
		// Cut inside é at the start and inside ü at the end.
		rr, err := sb.ReadFile(ctx, agent.ReadParams{Path: "u.txt", Offset: 1, Limit: int64(len(text) - 2)})
		if err != nil {
			t.Fatal(err)
		}
		if want := text[1:2] + " [REDACTED] " + text[len(text)-2:len(text)-1]; string(rr.Data) != want {
			t.Fatalf("chunk = %q, want %q", rr.Data, want)
		}
		return nil
	})
}

// TestGuardIdleFlush: output held back by the guard (a prompt without a
// newline) is released once the stream is quiet, while the run goes on.
func TestGuardIdleFlush(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}, Idle: true}
	e := newEnv(t, contexts.Config{Guard: g})
	seen := make(chan string, 8)
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		out(agent.OutputEvent{Stream: agent.Stdout, Data: "name? "})
		select {
		case got := <-seen:
			return &agent.RunCodeResult{Success: true, Stdout: "saw " + got}, nil
		case <-time.After(20 * time.Second):
			return &agent.RunCodeResult{Success: true, Stdout: "the prompt never arrived while the run went on"}, nil
		}
	}
	res, err := e.m.Execute(e.ctx, ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: "input()"},
		func(ev agent.OutputEvent) {
			if ev.Data != "" {
				seen <- ev.Data
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "saw name? " {
		t.Fatalf("run: %q", res.Stdout)
	}
}

// TestMasked: Masked hands the guard the declared values a context has
// seen, for what its sandbox sends outside a call (its ports, its audit
// events); an unknown context adds nothing.
func TestMasked(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "masked", "main")
	ctx := contexts.WithSecrets(e.ctx, map[string]string{"TOKEN": "declared-value-1"})
	res, err := e.m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := contexts.MaskedValues(e.m.Masked(e.ctx, res.ContextID)); len(got) != 1 || got[0] != "declared-value-1" {
		t.Fatalf("Masked(the context) = %q", got)
	}
	if got := contexts.MaskedValues(e.m.Masked(e.ctx, "no-such-context")); got != nil {
		t.Fatalf("Masked(an unknown context) = %q", got)
	}
}

// TestGuardKeepsSentence: an error from the sandbox that carries a public
// sentence (errdefs.Public: an agent's own message) keeps it through the
// guard, redacted like its text, and its category; the chain around it
// (the sandbox id, the method) does not reach the caller.
func TestGuardKeepsSentence(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	e := newEnv(t, contexts.Config{Guard: g})
	e.p.Run = func(context.Context, *contextstest.Sandbox, agent.RunCodeParams, contexts.OutputFunc) (*agent.RunCodeResult, error) {
		return nil, errdefs.Public(fmt.Errorf("sandbox sb-1: kernel.run: no r kernel (sk-SECRET): %w", errdefs.ErrFailedPrecondition),
			"no r kernel: R is not installed in this sandbox (sk-SECRET)")
	}
	_, err := e.m.Execute(e.ctx, ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "r", Code: "1"}, nil)
	wantCategory(t, err, errdefs.ErrFailedPrecondition)
	if got := errdefs.PublicMessage(err); got != "no r kernel: R is not installed in this sandbox ([REDACTED])" {
		t.Fatalf("public message %q", got)
	}
	if strings.Contains(err.Error(), "sk-SECRET") {
		t.Fatalf("the error's text is not guarded: %q", err)
	}
}

// taskRecorder records the task type of every call to the guard.
type taskRecorder struct {
	contextstest.Guard
	mu    sync.Mutex
	tasks map[string]int
}

func (g *taskRecorder) note(ctx context.Context) {
	g.mu.Lock()
	g.tasks[contexts.TaskTypeOf(ctx)]++
	g.mu.Unlock()
}

func (g *taskRecorder) Text(ctx context.Context, tenantID, s string) string {
	g.note(ctx)
	return g.Guard.Text(ctx, tenantID, s)
}

func (g *taskRecorder) Stream(ctx context.Context, tenantID string) contexts.StreamRedactor {
	g.note(ctx)
	return g.Guard.Stream(ctx, tenantID)
}

func (g *taskRecorder) File(ctx context.Context, tenantID string) contexts.FileRedactor {
	g.note(ctx)
	return g.Guard.File(ctx, tenantID)
}

// TestGuardSeesTaskType: everything the manager guards reaches the guard
// labelled sandbox-execution (001 §7.1's task type), so the guard can
// resolve its mode per task type; a caller's own label is kept.
func TestGuardSeesTaskType(t *testing.T) {
	g := &taskRecorder{tasks: map[string]int{}}
	e := newEnv(t, contexts.Config{Guard: g})
	id := ident("t1", "c1", "main")
	if _, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print('hi')"}, func(agent.OutputEvent) {}); err != nil {
		t.Fatal(err)
	}
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		if _, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo hi"}, nil); err != nil {
			return err
		}
		if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: "f.txt", Data: []byte("text")}); err != nil {
			return err
		}
		return contexts.ReadFile(ctx, sb, "f.txt", func(contexts.FileChunk) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	got := maps.Clone(g.tasks)
	g.mu.Unlock()
	if len(got) != 1 || got[contexts.TaskSandboxExecution] < 3 {
		t.Fatalf("task types the guard saw: %v, want only %s", got, contexts.TaskSandboxExecution)
	}
	other := contexts.WithTaskType(e.ctx, "other")
	e.m.Use(other, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		_, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo hi"}, nil)
		return err
	})
	if g.tasks["other"] == 0 {
		t.Fatalf("a caller's own task type was replaced: %v", g.tasks)
	}
}
