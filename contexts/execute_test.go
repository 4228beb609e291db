package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
)

func TestExecuteValidation(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	for _, tc := range []struct {
		name string
		req  contexts.ExecuteRequest
		ok   bool
	}{
		{"python", contexts.ExecuteRequest{Language: "python", Code: "1"}, true},
		{"javascript", contexts.ExecuteRequest{Language: "javascript", Code: "1"}, true},
		{"typescript", contexts.ExecuteRequest{Language: "typescript", Code: "1"}, true},
		{"bash", contexts.ExecuteRequest{Language: "bash", Code: "1"}, true},
		{"sh", contexts.ExecuteRequest{Language: "sh", Code: "1"}, true},
		{"ruby", contexts.ExecuteRequest{Language: "ruby", Code: "1"}, false},
		{"empty language", contexts.ExecuteRequest{Code: "1"}, false},
		{"100 KB", contexts.ExecuteRequest{Language: "python", Code: strings.Repeat("a", 100*1024)}, true},
		{"100 KB + 1", contexts.ExecuteRequest{Language: "python", Code: strings.Repeat("a", 100*1024+1)}, false},
		{"timeout 1 s", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: time.Second}, true},
		{"timeout 600 s", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: 600 * time.Second}, true},
		{"timeout 999 ms", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: 999 * time.Millisecond}, false},
		{"timeout 601 s", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: 601 * time.Second}, false},
		{"negative timeout", contexts.ExecuteRequest{Language: "python", Code: "1", Timeout: -time.Second}, false},
		{"unbounded", contexts.ExecuteRequest{Language: "python", Code: "1", Unbounded: true}, true},
		{"unbounded with a timeout", contexts.ExecuteRequest{Language: "python", Code: "1", Unbounded: true, Timeout: time.Second}, false},
		{"150 KB under a code limit", contexts.ExecuteRequest{Language: "python", Code: strings.Repeat("a", 150*1024), CodeLimit: contexts.MaxCodeLimit}, true},
		{"code limit past its maximum", contexts.ExecuteRequest{Language: "python", Code: strings.Repeat("a", contexts.MaxCodeLimit+1), CodeLimit: 2 * contexts.MaxCodeLimit}, false},
		{"code limit below the config", contexts.ExecuteRequest{Language: "python", Code: strings.Repeat("a", 100*1024+1), CodeLimit: 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.m.Execute(e.ctx, id, tc.req, nil)
			if tc.ok && err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				wantCategory(t, err, errdefs.ErrInvalidArgument)
			}
		})
	}
}

func TestStatePersistsAndBranchesAreIsolated(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	main := ident("t1", "c1", "main")
	e.exec(main, "x = 42")
	if res := e.exec(main, "print(x)"); res.Stdout != "42\n" {
		t.Fatalf("main: %+v", res)
	}
	created := e.p.Created()
	if err := e.m.PathEvent(e.ctx, main, contexts.PathEvent{Type: contexts.PathBranched, TargetPathID: "b1"}); err != nil {
		t.Fatal(err)
	}
	if e.p.Created() != created {
		t.Fatal("branched created a sandbox")
	}
	res := e.exec(ident("t1", "c1", "b1"), "print(x)")
	if res.Error == nil || res.Error.Name != "NameError" || res.Success {
		t.Fatalf("branch b1 sees main's x: %+v", res)
	}
	if res := e.exec(main, "print(x)"); res.Stdout != "42\n" {
		t.Fatalf("main after branch: %+v", res)
	}
}

// TestUnboundedRun: an unbounded run reaches the sandbox with TimeoutMs -1
// and a ctx without deadline; the caller's cancel ends it.
func TestUnboundedRun(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	type seen struct {
		ms          int64
		hasDeadline bool
	}
	got := make(chan seen, 1)
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		_, ok := ctx.Deadline()
		got <- seen{p.TimeoutMs, ok}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Execute(ctx, ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: "1", Unbounded: true}, nil)
		done <- err
	}()
	if s := <-got; s.ms != -1 || s.hasDeadline {
		t.Fatalf("the sandbox saw timeoutMs %d, deadline %v; want -1 and none", s.ms, s.hasDeadline)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled unbounded run: %v", err)
	}
}

func TestExecuteTimeoutKeepsContextReady(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	e.exec(id, "x = 1")
	res, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "sleep 5000", Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Success {
		t.Fatalf("result = %+v, want a timeout", res)
	}
	if r := e.record(res.ContextID); r.State != contexts.StateReady {
		t.Fatalf("context after timeout: %+v", r)
	}
	if again := e.exec(id, "print(x)"); again.ContextID != res.ContextID || again.Stdout != "1\n" {
		t.Fatalf("after timeout: %+v", again)
	}
}

func TestExecuteSerializesPerContextAndParallelizesAcross(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerConversation: -1})
	var mu sync.Mutex
	inside := map[string]int{}
	maxPer, total, maxTotal := 0, 0, 0
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		mu.Lock()
		inside[sb.ID()]++
		total++
		maxPer, maxTotal = max(maxPer, inside[sb.ID()]), max(maxTotal, total)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		inside[sb.ID()]--
		total--
		mu.Unlock()
		return &agent.RunCodeResult{Success: true}, nil
	}
	var wg sync.WaitGroup
	for i := range 20 {
		id := ident("t1", "c1", []string{"main", "b1"}[i%2])
		wg.Go(func() {
			if _, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if maxPer != 1 {
		t.Fatalf("%d calls ran at once in one context, want 1", maxPer)
	}
	if maxTotal < 2 {
		t.Fatalf("contexts never ran in parallel (max %d)", maxTotal)
	}
}

func TestRotation(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxExecutionsPerContext: 3})
	id := ident("t1", "c1", "main")
	var first string
	for i := range 3 {
		res := e.exec(id, "x = 1")
		// Only the call that uses up the executions says so.
		if want := i == 2; res.Rotated != want {
			t.Errorf("call %d: Rotated = %v, want %v", i+1, res.Rotated, want)
		}
		if i == 0 {
			first = res.ContextID
		} else if res.ContextID != first {
			t.Fatalf("call %d ran in %s, want %s", i+1, res.ContextID, first)
		}
	}
	r := e.record(first)
	if r.State != contexts.StateTerminated || r.Reason != contexts.ReasonRotated || r.ExecutionCount != 3 {
		t.Fatalf("after 3 calls: %+v", r)
	}
	if e.running(r.SandboxID) {
		t.Fatal("rotated sandbox still runs")
	}
	res := e.exec(id, "print(x)")
	if res.ContextID == first || res.Error == nil || res.Rotated {
		t.Fatalf("4th call: %+v, want a fresh context without x, not itself rotated", res)
	}
}

func TestSandboxLostDuringExecution(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		e.p.Vanish(sb.ID())
		return nil, fmt.Errorf("sandbox %s: agent connection lost: EOF: %w", sb.ID(), errdefs.ErrUnavailable)
	}
	_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "boom"}, nil)
	wantCategory(t, err, errdefs.ErrUnavailable)
	if st := e.m.Stats(); st.HealthCheckFailures != 1 || st.Active != 0 {
		t.Fatalf("after the loss: %+v", st)
	}
	e.p.Run = nil
	res := e.exec(id, "print('again')")
	if res.ContextID == first.ContextID || res.Stdout != "again\n" {
		t.Fatalf("after loss: %+v", res)
	}
	if r := e.record(first.ContextID); r.State != contexts.StateError {
		t.Fatalf("lost context: %+v", r)
	}
}

func TestRotationBeforeNextCall(t *testing.T) {
	e1 := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	var first *contexts.ExecuteResult
	for range 3 {
		first = e1.exec(id, "1")
	}
	e1.m.Close(e1.ctx)
	// A restart with a lower limit: the context is over it already.
	e2 := e1.second(contexts.Config{MaxExecutionsPerContext: 2})
	res := e2.exec(id, "1")
	if res.ContextID == first.ContextID {
		t.Fatal("context over the limit was reused")
	}
	if r := e2.record(first.ContextID); r.Reason != contexts.ReasonRotated || e2.running(first.SandboxID) {
		t.Fatalf("old context: %+v", r)
	}
}

func TestCloseDuringExecuteKeepsContext(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	started, release := make(chan struct{}), make(chan struct{})
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		close(started)
		<-release
		if err := sb.Ping(ctx); err != nil { // the connection was closed under the call
			return nil, err
		}
		return &agent.RunCodeResult{Success: true}, nil
	}
	done := make(chan error)
	go func() {
		_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
		done <- err
	}()
	<-started
	closed := make(chan error)
	go func() { closed <- e.m.Close(e.ctx) }()
	waitFor(t, "Close to detach", func() bool {
		_, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
		return errors.Is(err, errdefs.ErrUnavailable)
	})
	close(release)
	if err := <-done; !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Execute during Close: %v, want unavailable", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if r := e.record(first.ContextID); r.State != contexts.StateReady || !e.running(first.SandboxID) {
		t.Fatalf("Close during Execute ended the context: %+v (running %v)", r, e.running(first.SandboxID))
	}
}

func TestAgentRefusalKeepsContext(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		return nil, fmt.Errorf("kernel name %q is not valid: %w", p.Kernel, errdefs.ErrInvalidArgument)
	}
	_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1", Kernel: "bad name"}, nil)
	wantCategory(t, err, errdefs.ErrInvalidArgument)
	e.p.Run = nil
	if res := e.exec(id, "print(x)"); res.ContextID != first.ContextID || res.Stdout != "1\n" {
		t.Fatalf("after a refused call: %+v", res)
	}
	if st := e.m.Stats(); st.HealthCheckFailures != 0 {
		t.Fatalf("stats = %+v", st)
	}
}
