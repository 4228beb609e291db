package e2bcompat_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	fspb "github.com/sandlot/sandlot/e2bwire/filesystem"
	"github.com/sandlot/sandlot/e2bwire/filesystem/filesystemconnect"
	pb "github.com/sandlot/sandlot/e2bwire/process"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
	"github.com/sandlot/sandlot/tenant"
)

// TestStateEndsWithContext: whatever ends a sandbox's context (its expiry
// found by the cleanup loop, rotation at the manager's execution limit, a
// terminate through /v1, the end of an MCP session, a path event), every
// surface of the edge lets go of what it keeps of that sandbox then,
// without any call on the sandbox finding it gone: core the envd token it
// keeps for signed URLs, control the metric samples, envd the created
// watcher, the streaming watch (whose stream ends) and a running command's
// output fan-out (whose stream drops, as E2B's edge drops it), interp the
// code contexts. Each path ends an idle sandbox and one running a command.
// Before, that state stayed until a call on the sandbox happened to see it
// gone: an idle sandbox's, for ever.
func TestStateEndsWithContext(t *testing.T) {
	const tenantID = "tenant-1"
	for _, tc := range []struct {
		name string
		// v1 creates the context as /v1 does before the E2B create names
		// its conversation (rotation needs a context that rotates).
		v1  bool
		end func(t *testing.T, e *env, clk *testClock, id string)
	}{
		{"expired", false, func(t *testing.T, e *env, clk *testClock, id string) {
			clk.Advance(2 * time.Minute)
			if _, err := e.M.Cleanup(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
		{"rotated", true, func(t *testing.T, e *env, clk *testClock, id string) {
			for range maxExecutions + 1 {
				rec, err := e.M.Get(tenant.WithID(context.Background(), tenantID), tenantID, id)
				if err != nil {
					t.Fatal(err)
				}
				if !rec.State.Active() {
					if rec.Reason != contexts.ReasonRotated {
						t.Fatalf("ended with reason %s, want rotated", rec.Reason)
					}
					return
				}
				// as /v1 runs code in the context
				if _, err := e.M.Execute(tenant.WithID(context.Background(), tenantID), rec.Identity,
					contexts.ExecuteRequest{Code: "1", Language: "python", ContextID: id}, nil); err != nil {
					t.Fatal(err)
				}
			}
			t.Fatal("the context did not rotate")
		}},
		{"terminated through /v1", false, func(t *testing.T, e *env, clk *testClock, id string) {
			if err := e.M.Terminate(context.Background(), tenantID, id, contexts.ReasonManual); err != nil {
				t.Fatal(err)
			}
		}},
		{"ended with its MCP session", false, func(t *testing.T, e *env, clk *testClock, id string) {
			if err := e.M.Terminate(context.Background(), tenantID, id, contexts.ReasonDeleted); err != nil {
				t.Fatal(err)
			}
		}},
		{"path archived", false, func(t *testing.T, e *env, clk *testClock, id string) {
			// An E2B sandbox without a conversationId is its own conversation.
			ev := contexts.PathEvent{Type: contexts.PathArchived}
			if err := e.M.PathEvent(context.Background(), contexts.Identity{TenantID: tenantID, ConversationID: id, PathID: "main"}, ev); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &testClock{now: time.Now()}
			e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Manager: contexts.Config{Clock: clk.Now,
				MaxExecutionsPerContext: maxExecutions, CleanupInterval: time.Hour}})
			var held []*holder
			for i, running := range []bool{false, true} {
				if !tc.v1 {
					held = append(held, hold(t, e, e.Create(key1, `{"timeout":60}`), running))
					continue
				}
				conv := "conv-" + strconv.Itoa(i)
				rec, err := e.M.GetOrCreate(tenant.WithID(context.Background(), tenantID),
					contexts.Identity{TenantID: tenantID, ConversationID: conv}, contexts.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				sb := e.Create(key1, `{"timeout":60,"metadata":{"conversationId":"`+conv+`"}}`)
				if sb.SandboxID != rec.ID {
					t.Fatalf("the E2B create of conversation %s gave sandbox %s, not its context %s", conv, sb.SandboxID, rec.ID)
				}
				held = append(held, hold(t, e, sb, running))
			}
			for _, h := range held {
				if got := e.H.Holding(h.sb.SandboxID); !slices.Equal(got, []string{"core", "control", "envd", "interp"}) {
					t.Fatalf("a sandbox in use: state kept by %v, want every part", got)
				}
			}
			for _, h := range held {
				tc.end(t, e, clk, h.sb.SandboxID)
			}
			for _, h := range held {
				h.released(t, e)
			}
		})
	}
}

// maxExecutions is the manager's rotation limit in TestStateEndsWithContext.
const maxExecutions = 4

// testClock is a manager clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// holder is a sandbox with state on every surface of the edge.
type holder struct {
	sb      created
	watch   chan error // the streaming watch's end
	command chan error // the running command's stream's end; nil: none runs
}

// hold puts state of sb on every surface: a token (create kept it), metric
// samples, a code context, a created watcher, a streaming watch and, when
// running, a command that runs until its sandbox ends.
func hold(t *testing.T, e *env, sb created, running bool) *holder {
	t.Helper()
	h := &holder{sb: sb, watch: make(chan error, 1)}
	if r := e.Do("GET", "/sandboxes/"+sb.SandboxID+"/metrics", nil, "X-API-KEY", key1); r.StatusCode != 200 {
		t.Fatalf("metrics: %d", r.StatusCode)
	}
	if r := e.Do("POST", "/contexts", strings.NewReader(`{"language":"python"}`), e.Headers(sb, "49999")...); r.StatusCode != 200 {
		t.Fatalf("code context: %d", r.StatusCode)
	}
	if r := e.Do("POST", "/filesystem.Filesystem/CreateWatcher", strings.NewReader(`{"path":"/home/user"}`),
		append(e.Headers(sb, "49983"), "Content-Type", "application/json", "Connect-Protocol-Version", "1")...); r.StatusCode != 200 {
		t.Fatalf("create watcher: %d", r.StatusCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	headers := func(hdr http.Header) {
		hdr.Set("E2b-Sandbox-Id", sb.SandboxID)
		hdr.Set("E2b-Sandbox-Port", "49983")
		hdr.Set("X-Access-Token", sb.EnvdAccessToken)
	}
	fs := filesystemconnect.NewFilesystemClient(http.DefaultClient, e.Srv.URL, connect.WithProtoJSON())
	wreq := connect.NewRequest(&fspb.WatchDirRequest{Path: "/home/user"})
	headers(wreq.Header())
	ws, err := fs.WatchDir(ctx, wreq)
	if err != nil {
		t.Fatal(err)
	}
	if !ws.Receive() || ws.Msg().GetStart() == nil {
		t.Fatalf("watch: no start event: %v", ws.Err())
	}
	go func() {
		for ws.Receive() {
		}
		h.watch <- ws.Err()
	}()
	if running {
		h.command = make(chan error, 1)
		pc := processconnect.NewProcessClient(http.DefaultClient, e.Srv.URL, connect.WithProtoJSON())
		preq := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "sleep 600"}}})
		headers(preq.Header())
		ps, err := pc.Start(ctx, preq)
		if err != nil {
			t.Fatal(err)
		}
		if !ps.Receive() || ps.Msg().GetEvent().GetStart() == nil {
			t.Fatalf("command: no start event: %v", ps.Err())
		}
		go func() {
			var end bool
			for ps.Receive() {
				end = end || ps.Msg().GetEvent().GetEnd() != nil
			}
			err := ps.Err()
			if end && err == nil {
				err = errors.New("the command ended as if it had exited")
			}
			h.command <- err
		}()
	}
	return h
}

// released waits (bounded) for every surface to have let go of h's
// sandbox, and for its streams to have ended: the watch's as E2B's envd
// ends it when its sandbox goes (unavailable), the command's dropped.
func (h *holder) released(t *testing.T, e *env) {
	t.Helper()
	sid := h.sb.SandboxID
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for held := e.H.Holding(sid); len(held) > 0; held = e.H.Holding(sid) {
		select {
		case <-deadline:
			t.Fatalf("sandbox %s (command running: %v) ended, yet its state is still kept by %v", sid, h.command != nil, held)
		case <-tick.C:
		}
	}
	select {
	case err := <-h.watch:
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("the watch of an ended sandbox ended with %v, want unavailable", err)
		}
	case <-deadline:
		t.Fatal("the watch of an ended sandbox is still open")
	}
	if h.command == nil {
		return
	}
	select {
	case err := <-h.command:
		if err == nil {
			t.Error("the command's stream ended cleanly; want it dropped with its sandbox")
		}
	case <-deadline:
		t.Fatal("the command's stream of an ended sandbox is still open")
	}
}

// TestOtherTenantCannotForget: a call with another tenant's API key that
// names a sandbox answers as for one that is not there and leaves the
// sandbox's state alone; a running command's stream stays open. Before,
// such a call made the edge forget what it kept of the sandbox (its code
// contexts, its token for signed URLs, its watchers): the not_found of a
// sandbox that is not the caller's was taken for one that ended.
func TestOtherTenantCannotForget(t *testing.T) {
	e := newEnv(t)
	victim := hold(t, e, e.Create(key1, `{}`), true)
	sid := victim.sb.SandboxID
	for _, port := range []string{"49983", "49999"} {
		r := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sid, "E2b-Sandbox-Port", port, "X-API-KEY", e2bcompattest.Key2)
		if r.StatusCode != 502 && r.StatusCode != 404 {
			t.Fatalf("port %s with another tenant's key: %d, want the answer for a sandbox that is not there", port, r.StatusCode)
		}
	}
	if got := e.H.Holding(sid); !slices.Equal(got, []string{"core", "control", "envd", "interp"}) {
		t.Fatalf("after another tenant named the sandbox, its state is kept by %v only", got)
	}
	select {
	case err := <-victim.command:
		t.Fatalf("the command's stream ended when another tenant named its sandbox: %v", err)
	case err := <-victim.watch:
		t.Fatalf("the watch ended when another tenant named its sandbox: %v", err)
	default:
	}
}
