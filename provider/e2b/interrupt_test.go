package e2b_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/provider/e2b"
)

// e2bInterp is a code interpreter that behaves as E2B's does at its worst
// for a timed-out cell: one run at a time per context (a run waits for the
// one before it), the execution count sent as the cell starts, and a
// client's hang-up not stopping the cell. A "late" cell ends, interrupted,
// noticeLate after its client left (E2B notices at its next keepalive
// write); a "deaf" cell ends only when its context restarts. A cell queued
// before a restart never runs, as E2B's (it waits on the closed websocket
// of the kernel before), whether or not its client's hang-up was noticed.
type e2bInterp struct {
	noticeLate time.Duration

	mu       sync.Mutex
	count    int
	restarts int
	busy     chan struct{} // held by the running cell (buffered 1)
	restart  chan struct{} // closed by a restart
	done     chan struct{} // closed when the test ends: every cell returns
}

func newE2BInterp(noticeLate time.Duration) *e2bInterp {
	return &e2bInterp{noticeLate: noticeLate, busy: make(chan struct{}, 1), restart: make(chan struct{}), done: make(chan struct{})}
}

func (f *e2bInterp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "POST" && r.URL.Path == "/contexts":
		fmt.Fprint(w, `{"id":"ctx-1","language":"python","cwd":"/home/user"}`)
	case r.Method == "POST" && r.URL.Path == "/contexts/ctx-1/restart":
		f.mu.Lock()
		close(f.restart)
		f.restart = make(chan struct{})
		f.count = 0
		f.restarts++
		f.mu.Unlock()
	case r.Method == "POST" && r.URL.Path == "/execute":
		f.execute(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *e2bInterp) execute(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Code string `json:"code"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	send := func(v string) {
		fmt.Fprintln(w, v)
		w.(http.Flusher).Flush()
	}
	f.mu.Lock()
	queuedOn := f.restart // the kernel this cell was queued on
	f.mu.Unlock()
	select { // wait for the cell before, as E2B's per-context lock does
	case f.busy <- struct{}{}:
	case <-r.Context().Done(): // a waiting request whose client left is dropped
		return
	case <-f.done:
		return
	}
	defer func() { <-f.busy }()
	f.mu.Lock()
	if queuedOn != f.restart {
		// E2B's restart closes the context's websocket and opens a new
		// one: a cell queued on the old one never runs in the new kernel
		// (also when the server has not yet noticed its client left).
		f.mu.Unlock()
		return
	}
	f.count++
	n, restart := f.count, f.restart
	f.mu.Unlock()
	send(fmt.Sprintf(`{"type":"number_of_executions","execution_count":%d}`, n))
	switch body.Code {
	case "late":
		send(`{"type":"stdout","text":"started\n","timestamp":""}`)
		<-r.Context().Done()
		time.Sleep(f.noticeLate)
		return
	case "deaf":
		send(`{"type":"stdout","text":"started\n","timestamp":""}`)
		select {
		case <-restart:
		case <-f.done:
		}
		return
	}
	send(fmt.Sprintf(`{"type":"result","is_main_result":true,"text":%q}`, "ran "+body.Code))
	send(`{"type":"end_of_execution"}`)
}

// interpSandbox creates a sandbox through sandlot's E2B handler (the real
// manager over the memory store) whose code interpreter calls are answered
// by f.
func interpSandbox(t *testing.T, f http.Handler) contexts.Sandbox {
	t.Helper()
	h := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Tenants: e2bcompattest.Tenants{testKey: "tenant-1"}}}).H
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(e2bwire.HeaderSandboxPort) == e2bwire.InterpreterPort {
			f.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, ConnectTimeout: 5 * time.Second})
	sb, err := p.Create(context.Background(), contexts.Spec{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// TestTimedOutCellDoesNotBlock: after a run times out, the kernel's next
// run starts at once, also against a code interpreter that keeps running
// a cell whose client left: one it interrupts late keeps its state (no
// restart), one that ignores the interrupt has its context restarted and
// says so (KernelRestarted, the state gone), as a local kernel does.
// Before, the next run queued behind the timed-out cell, forever for the
// deaf one.
func TestTimedOutCellDoesNotBlock(t *testing.T) {
	t.Cleanup(e2b.SetRecoverWaits(3*time.Second, 3*time.Second))
	for _, tc := range []struct {
		cell      string
		restarted bool
		count     int // of the next run: the probe is not counted
	}{
		{"late", false, 2},
		{"deaf", true, 1},
	} {
		t.Run(tc.cell, func(t *testing.T) {
			f := newE2BInterp(300 * time.Millisecond)
			sb := interpSandbox(t, f)
			t.Cleanup(func() { close(f.done) }) // before the server closes
			ctx := context.Background()
			res, err := sb.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: tc.cell, TimeoutMs: 1000}, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantErr := "execution timed out after 1s"
			if tc.restarted {
				wantErr += "; the kernel was restarted and its state is gone"
			}
			if !res.TimedOut || res.Success || res.ExitCode != 124 || res.Error == nil || res.Error.Name != "TimeoutError" ||
				res.Error.Value != wantErr || res.KernelRestarted != tc.restarted || res.Stdout != "started\n" {
				t.Fatalf("timed-out run: %+v (error %+v)", res, res.Error)
			}
			// The next run must not wait for the timed-out cell: bounded
			// well below the deaf cell's forever.
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			next, err := sb.RunCode(nctx, agent.RunCodeParams{Language: agent.Python, Code: "x", TimeoutMs: 10_000}, nil)
			if err != nil {
				t.Fatalf("the next run queued behind the timed-out cell: %v", err)
			}
			if next.TimedOut || len(next.Results) != 1 || next.Results[0].Text != "ran x" || next.ExecutionCount != tc.count {
				t.Fatalf("next run: %+v", next)
			}
			f.mu.Lock()
			restarts := f.restarts
			f.mu.Unlock()
			if (restarts > 0) != tc.restarted {
				t.Fatalf("%d restarts of the context", restarts)
			}
		})
	}
}

// TestShRunsOnce: an sh cell is a fresh /bin/sh through envd, not the bash
// kernel: its exit status is the exit code, and nothing it sets survives.
func TestShRunsOnce(t *testing.T) {
	type start struct {
		Process struct {
			Cmd  string   `json:"cmd"`
			Args []string `json:"args"`
		} `json:"process"`
	}
	var mu sync.Mutex
	var starts []start
	sb := interceptedSandbox(t, e2bwire.EnvdPort, "/process.Process/Start", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var s start
		if len(b) > 5 { // a Connect envelope: flags, length, then the message
			json.Unmarshal(b[5:], &s)
		}
		mu.Lock()
		starts = append(starts, s)
		mu.Unlock()
		http.Error(w, `{"code":"unavailable","message":"test"}`, http.StatusServiceUnavailable)
	})
	_, err := sb.RunCode(context.Background(), agent.RunCodeParams{Language: agent.Sh, Code: "exit 3"}, nil)
	if err == nil {
		t.Fatal("no error from the refused Start")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 1 || starts[0].Process.Cmd != "/bin/sh" || strings.Join(starts[0].Process.Args, " ") != "-c exit 3" {
		t.Fatalf("Start requests %+v", starts)
	}
}
