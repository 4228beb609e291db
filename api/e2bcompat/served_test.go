package e2bcompat_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
)

// readCount is the real manager counting how the edge reads a record.
type readCount struct {
	*contexts.Manager
	gets, served atomic.Int64
}

func (c *readCount) Get(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	c.gets.Add(1)
	return c.Manager.Get(ctx, tenantID, id)
}

func (c *readCount) Served(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	c.served.Add(1)
	return c.Manager.Served(ctx, tenantID, id)
}

// TestSandboxCallsReadTheManagersCopy: a call on a sandbox (envd's files
// and process calls) reads its record from the manager's copy (Served),
// not from the store (Get) as it did on every call; a sandbox killed
// meanwhile is still refused at once.
func TestSandboxCallsReadTheManagersCopy(t *testing.T) {
	var rc *readCount
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Wrap: func(m *contexts.Manager) e2bcompat.Manager {
		rc = &readCount{Manager: m}
		return rc
	}})
	sb := e.Create(key1, `{}`)
	rc.gets.Store(0)
	hdr := append(e.Headers(sb, "49983"), "Content-Type", "application/octet-stream")
	calls := []func() (int, string){
		func() (int, string) {
			return status(e.Do("POST", "/files?path=/home/user/a.txt", strings.NewReader("hello"), hdr...))
		},
		func() (int, string) {
			return status(e.Do("GET", "/files?path=/home/user/a.txt", nil, e.Headers(sb, "49983")...))
		},
		func() (int, string) {
			return status(e.Do("POST", "/process.Process/List", strings.NewReader("{}"), append(e.Headers(sb, "49983"), "Content-Type", "application/json", "Connect-Protocol-Version", "1")...))
		},
	}
	for i, call := range calls {
		if code, body := call(); code != 200 {
			t.Fatalf("call %d: %d %s", i, code, body)
		}
	}
	if g, s := rc.gets.Load(), rc.served.Load(); g != 0 || s != int64(len(calls)) {
		t.Fatalf("%d calls read the record %d times from the store and %d from the manager's copy; want 0 and %d", len(calls), g, s, len(calls))
	}
	if code, body := status(e.Do("DELETE", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)); code != 204 {
		t.Fatalf("kill: %d %s", code, body)
	}
	if code, body := calls[1](); code < 400 {
		t.Fatalf("a call on the killed sandbox: %d %s", code, body)
	}
}

// status reads a response's code and body.
func status(resp *http.Response) (int, string) {
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
