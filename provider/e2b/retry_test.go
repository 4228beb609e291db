package e2b_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
)

// flaky is a fake E2B (control plane and envd on one URL) whose every
// route fails its first fails[route] requests in the way fail says, and
// counts the requests per route ("METHOD /path").
type flaky struct {
	t     *testing.T
	fails int
	fail  func(w http.ResponseWriter) // how a failing request is answered
	mu    sync.Mutex
	calls map[string]int
	at    map[string][]time.Time
}

func newFlaky(t *testing.T, fails int, fail func(w http.ResponseWriter)) (*flaky, *httptest.Server) {
	f := &flaky{t: t, fails: fails, fail: fail, calls: map[string]int{}, at: map[string][]time.Time{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *flaky) count(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[route]
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.calls[route]++
	n := f.calls[route]
	f.at[route] = append(f.at[route], time.Now())
	f.mu.Unlock()
	if n <= f.fails {
		f.fail(w)
		return
	}
	switch route {
	case "GET /sandboxes/sb-1":
		w.Write([]byte(`{"sandboxID":"sb-1","metadata":{"sandlotTTL":"60"}}`))
	case "POST /v2/sandboxes/sb-1/connect":
		w.Write([]byte(`{"sandboxID":"sb-1","envdVersion":"0.2.0"}`))
	case "GET /sandboxes/sb-1/metrics":
		w.Write([]byte(`[{"timestampUnix":1,"memUsed":5}]`))
	case "GET /v2/sandboxes":
		w.Write([]byte(`[{"sandboxID":"sb-1"}]`))
	case "POST /sandboxes/sb-1/timeout":
		w.WriteHeader(http.StatusNoContent)
	case "DELETE /sandboxes/sb-1":
		w.WriteHeader(http.StatusNoContent)
	case "GET /files":
		w.Header().Set("Content-Range", "bytes 0-4/5")
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte("hello"))
	default:
		http.Error(w, `{"message":"unexpected `+route+`"}`, http.StatusTeapot)
	}
}

// status answers a failing request with code (and Retry-After when set).
func status(code int, retryAfter string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		http.Error(w, `{"message":"try later"}`, code)
	}
}

// reset drops the connection without an answer.
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// idempotentCalls are the provider's calls that may be repeated: reads of
// the control plane and of files, the timeout refresh and the kill; each
// names the route it calls.
var idempotentCalls = []struct {
	route string
	call  func(ctx context.Context, p *e2b.Provider, sb contexts.Sandbox) error
}{
	{"GET /sandboxes/sb-1/metrics", func(ctx context.Context, p *e2b.Provider, _ contexts.Sandbox) error {
		_, err := p.Usage(ctx, "sb-1")
		return err
	}},
	{"GET /v2/sandboxes", func(ctx context.Context, p *e2b.Provider, _ contexts.Sandbox) error {
		ids, err := p.List(ctx)
		if err == nil && !cmp.Equal(ids, []string{"sb-1"}) {
			err = errors.New("list: " + strings.Join(ids, ","))
		}
		return err
	}},
	{"POST /sandboxes/sb-1/timeout", func(ctx context.Context, _ *e2b.Provider, sb contexts.Sandbox) error {
		return sb.(interface {
			SetTTL(context.Context, time.Duration) error
		}).SetTTL(ctx, time.Minute)
	}},
	{"DELETE /sandboxes/sb-1", func(ctx context.Context, p *e2b.Provider, _ contexts.Sandbox) error {
		return p.Destroy(ctx, "sb-1")
	}},
	{"GET /files", func(ctx context.Context, _ *e2b.Provider, sb contexts.Sandbox) error {
		res, err := sb.ReadFile(ctx, agent.ReadParams{Path: "/home/user/a.txt"})
		if err == nil && string(res.Data) != "hello" {
			err = errors.New("read " + string(res.Data))
		}
		return err
	}},
}

// attach connects to sb-1 on srv while it answers.
func attach(t *testing.T, srv *httptest.Server) (*e2b.Provider, contexts.Sandbox) {
	t.Helper()
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, ConnectTimeout: 5 * time.Second})
	sb, err := p.Attach(context.Background(), "sb-1")
	if err != nil {
		t.Fatal(err)
	}
	return p, sb
}

// TestTransientFailuresRetried: an idempotent call that meets a transient
// failure (a dropped connection, 502, 503, 504, 429) is tried again with
// backoff and succeeds once E2B answers; one that keeps failing returns the
// last failure after DefaultRetries retries, as unavailable.
func TestTransientFailuresRetried(t *testing.T) {
	failures := []struct {
		name string
		fail func(w http.ResponseWriter)
	}{
		{"connection dropped", reset},
		{"502", status(http.StatusBadGateway, "")},
		{"503", status(http.StatusServiceUnavailable, "")},
		{"504", status(http.StatusGatewayTimeout, "")},
		{"429", status(http.StatusTooManyRequests, "0")},
	}
	for _, fl := range failures {
		for _, c := range idempotentCalls {
			t.Run(fl.name+"/"+c.route, func(t *testing.T) {
				t.Parallel()
				f, srv := newFlaky(t, 0, fl.fail)
				p, sb := attach(t, srv)
				f.mu.Lock()
				f.fails = f.calls[c.route] + 2 // the two next calls of the route fail
				f.mu.Unlock()
				before := f.count(c.route)
				if err := c.call(context.Background(), p, sb); err != nil {
					t.Fatalf("after two transient failures: %v", err)
				}
				if got := f.count(c.route) - before; got != 3 {
					t.Errorf("%s requested %d times, want 3", c.route, got)
				}
			})
		}
	}
	t.Run("keeps failing", func(t *testing.T) {
		f, srv := newFlaky(t, 0, status(http.StatusServiceUnavailable, ""))
		p, sb := attach(t, srv)
		f.mu.Lock()
		f.fails = 1 << 30
		f.mu.Unlock()
		for _, c := range idempotentCalls {
			before := f.count(c.route)
			err := c.call(context.Background(), p, sb)
			if c.route == "GET /files" {
				if !errors.Is(err, errdefs.ErrUnavailable) {
					t.Errorf("%s failing: %v, want unavailable", c.route, err)
				}
			} else if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "503") {
				t.Errorf("%s failing: %v, want E2B's 503 as unavailable", c.route, err)
			}
			if got, want := f.count(c.route)-before, 1+e2b.DefaultRetries; got != want {
				t.Errorf("%s requested %d times, want %d", c.route, got, want)
			}
		}
	})
}

// TestRetryAfterHonoured: a 429's Retry-After sets the wait before the
// next try (at least a second here, far past the backoff's first step);
// a Retry-After past the caller's deadline is not waited for: the 429 is
// returned at once.
func TestRetryAfterHonoured(t *testing.T) {
	f, srv := newFlaky(t, 1, status(http.StatusTooManyRequests, "1"))
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL})
	if _, err := p.Usage(context.Background(), "sb-1"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	at := f.at["GET /sandboxes/sb-1/metrics"]
	f.mu.Unlock()
	if len(at) != 2 || at[1].Sub(at[0]) < time.Second {
		t.Fatalf("requests at %v: want two, a second apart at least", at)
	}

	f, srv = newFlaky(t, 1, status(http.StatusTooManyRequests, "3600"))
	p = e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.Usage(ctx, "sb-1")
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "429") || ctx.Err() != nil {
		t.Fatalf("Retry-After past the deadline: %v (context %v), want the 429 at once", err, ctx.Err())
	}
	if n := f.count("GET /sandboxes/sb-1/metrics"); n != 1 {
		t.Errorf("requested %d times, want 1", n)
	}
}

// TestRetryBoundedByCaller: the retries stop when the caller's context
// ends; the error is the caller's.
func TestRetryBoundedByCaller(t *testing.T) {
	f, srv := newFlaky(t, 1<<30, status(http.StatusTooManyRequests, "2"))
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for f.count("GET /sandboxes/sb-1/metrics") == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	if _, err := p.Usage(ctx, "sb-1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled during the wait: %v, want context.Canceled", err)
	}
	if n := f.count("GET /sandboxes/sb-1/metrics"); n != 1 {
		t.Errorf("requested %d times, want 1", n)
	}
}

// TestWritesNotRetried: a create, a command and a code cell are sent once
// whatever E2B answers: repeating one could start a second sandbox or run
// code twice.
func TestWritesNotRetried(t *testing.T) {
	f, srv := newFlaky(t, 0, status(http.StatusServiceUnavailable, ""))
	p, sb := attach(t, srv)
	f.mu.Lock()
	f.fails = 1 << 30
	f.mu.Unlock()
	ctx := context.Background()
	for _, c := range []struct {
		route string
		call  func() error
	}{
		{"POST /v2/sandboxes", func() error { _, err := p.Create(ctx, contexts.Spec{}); return err }},
		{"POST /process.Process/Start", func() error {
			_, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"true"}}, nil)
			return err
		}},
		{"POST /contexts", func() error {
			_, err := sb.RunCode(ctx, agent.RunCodeParams{Language: "python", Code: "1"}, nil)
			return err
		}},
	} {
		if err := c.call(); err == nil {
			t.Errorf("%s: no error from a service that answers 503", c.route)
		}
		if n := f.count(c.route); n != 1 {
			t.Errorf("%s requested %d times, want once", c.route, n)
		}
	}
}
