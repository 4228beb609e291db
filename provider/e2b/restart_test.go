package e2b_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
)

// blackhole accepts connections and never answers.
func blackhole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return "http://" + l.Addr().String()
}

// TestCallsBounded: List (at start and in every cleanup pass), Attach and
// Destroy against a service that accepts and stays silent give up after
// CallTimeout, even when the caller's context has no deadline.
func TestCallsBounded(t *testing.T) {
	const bound = 300 * time.Millisecond
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: blackhole(t), CallTimeout: bound})
	calls := map[string]func() error{
		"list":    func() error { _, err := p.List(context.Background()); return err },
		"attach":  func() error { _, err := p.Attach(context.Background(), "sb-1"); return err },
		"destroy": func() error { return p.Destroy(context.Background(), "sb-1") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := call()
			took := time.Since(start)
			if !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("err = %v, want unavailable", err)
			}
			if took < bound || took > bound+2*time.Second {
				t.Fatalf("gave up after %v, bound %v", took, bound)
			}
		})
	}
}

// TestListPagesBounded: a service that always names a next page cannot
// keep List reading forever.
func TestListPagesBounded(t *testing.T) {
	pages := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages++
		w.Header().Set("X-Next-Token", "more")
		json.NewEncoder(w).Encode([]map[string]string{{"sandboxID": "sb"}})
	}))
	t.Cleanup(srv.Close)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, ListPages: 5})
	_, err := p.List(context.Background())
	if !errors.Is(err, errdefs.ErrResourceExhausted) || pages != 5 {
		t.Fatalf("err = %v after %d pages, want resource_exhausted after 5", err, pages)
	}
}

// TestTTLSurvivesRestart: a daemon that attaches to a sandbox after a
// restart knows its TTL (kept in the sandbox's metadata on E2B's side):
// attaching sets the timeout to that TTL from now, and later operations
// keep extending it.
func TestTTLSurvivesRestart(t *testing.T) {
	srv := sandlotE2B(t)
	ctx := context.Background()
	first := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL})
	sb, err := first.Create(ctx, contexts.Spec{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	endsIn := func() time.Duration { return time.Until(sandboxEnd(t, srv.URL, sb.ID())) }
	// Time passes while the daemon is down: the sandbox has 1 min left.
	req, _ := http.NewRequest("POST", srv.URL+"/sandboxes/"+sb.ID()+"/timeout", jsonBody(t, map[string]int{"timeout": 60}))
	req.Header.Set("X-API-KEY", testKey)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("set timeout: %v %v", resp, err)
	}
	if d := endsIn(); d > 2*time.Minute {
		t.Fatalf("ends in %v after the 1 min timeout", d)
	}
	restarted := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, ExtendEvery: time.Millisecond})
	again, err := restarted.Attach(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if d := endsIn(); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("after attach the sandbox ends in %v, want its 1 h TTL", d)
	}
	// And operations extend it again (they did not after a restart: the
	// attached sandbox had no TTL).
	req, _ = http.NewRequest("POST", srv.URL+"/sandboxes/"+sb.ID()+"/timeout", jsonBody(t, map[string]int{"timeout": 60}))
	req.Header.Set("X-API-KEY", testKey)
	req.Header.Set("Content-Type", "application/json")
	http.DefaultClient.Do(req)
	time.Sleep(5 * time.Millisecond)
	if _, err := again.Stat(ctx, "/home/user"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for endsIn() < 59*time.Minute {
		if time.Now().After(deadline) {
			t.Fatal("an operation after attach did not extend the timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jsonBody(t *testing.T, v any) *bytes.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// sandboxEnd is a sandbox's endAt as sandlot's E2B surface at url reports it.
func sandboxEnd(t *testing.T, url, id string) time.Time {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/sandboxes/"+id, nil)
	req.Header.Set("X-API-KEY", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct{ EndAt time.Time }
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d.EndAt
}
