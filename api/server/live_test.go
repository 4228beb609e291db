package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// openEvents opens GET /v1/contexts/events with key and returns its
// events as they come; the stream ends with the test.
func openEvents(t *testing.T, url, key string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/contexts/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 256)
	go func() {
		defer res.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch
}

// waitEvent reads events until ok accepts one, and returns every event
// read; it fails the test after a bound.
func waitEvent(t *testing.T, ch <-chan sseEvent, what string, ok func(sseEvent) bool) []sseEvent {
	t.Helper()
	var seen []sseEvent
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				t.Fatalf("stream ended waiting for %s; saw %v", what, seen)
			}
			seen = append(seen, ev)
			if ok(ev) {
				return seen
			}
		case <-deadline:
			t.Fatalf("no %s within 30s; saw %v", what, seen)
		}
	}
}

// contextOfEvent decodes a context event ("" id when it is not one).
func contextOfEvent(ev sseEvent) api.Context {
	var ce api.ContextEvent
	if ev.name == "context" {
		_ = json.Unmarshal([]byte(ev.data), &ce)
	}
	return ce.Context
}

// TestContextEventsTenantIsolation attacks the live feed's wall: tenant
// A's stream, open while tenant B's contexts are created, used and ended
// beside A's, carries A's changes and never a byte of B's (its id, its
// conversation); the snapshot of a stream opened later lists A's only.
// An admin tenant's stream sees both. Checked to fail with the tenant
// filter of contexts.Watcher and the tenant-scoped read of the changed
// record both removed.
func TestContextEventsTenantIsolation(t *testing.T) {
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1})
	defer m.Close(context.Background())
	e := newEnv(t, func(c *server.Config) { c.Contexts, c.Live = m, m })
	admin := e.Tenants.AddAdmin("root")
	ts := httptest.NewServer(e.Handler)
	t.Cleanup(ts.Close) // after the streams' cancels (cleanups run last first)

	streamA := openEvents(t, ts.URL, e.KeyA)
	streamAdmin := openEvents(t, ts.URL, admin)
	var transcriptA []sseEvent
	transcriptA = append(transcriptA, waitEvent(t, streamA, "A's snapshot", func(ev sseEvent) bool { return ev.name == "snapshot" })...)

	ctx := context.Background()
	recB, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "tenant-b", ConversationID: "secret-conv-of-b"}, contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recA, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "tenant-a", ConversationID: "conv-a"}, contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	transcriptA = append(transcriptA, waitEvent(t, streamA, "A's context ready", func(ev sseEvent) bool {
		c := contextOfEvent(ev)
		return c.ID == recA.ID && c.Status == "ready"
	})...)
	waitEvent(t, streamAdmin, "B's context on the admin's stream", func(ev sseEvent) bool { return contextOfEvent(ev).ID == recB.ID })

	// A later stream's snapshot.
	later := openEvents(t, ts.URL, e.KeyA)
	snap := waitEvent(t, later, "the later snapshot", func(ev sseEvent) bool { return ev.name == "snapshot" })
	var s api.ContextSnapshot
	if err := json.Unmarshal([]byte(snap[len(snap)-1].data), &s); err != nil || len(s.Contexts) != 1 || s.Contexts[0].ID != recA.ID {
		t.Fatalf("A's later snapshot: %v %s", err, snap[len(snap)-1].data)
	}

	if err := m.Terminate(ctx, "tenant-b", recB.ID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	if err := m.Terminate(ctx, "tenant-a", recA.ID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	transcriptA = append(transcriptA, waitEvent(t, streamA, "A's context ended", func(ev sseEvent) bool {
		c := contextOfEvent(ev)
		return c.ID == recA.ID && c.Status == "terminated"
	})...)
	waitEvent(t, streamAdmin, "B's end on the admin's stream", func(ev sseEvent) bool {
		c := contextOfEvent(ev)
		return c.ID == recB.ID && c.Status == "terminated"
	})
	for _, ev := range transcriptA {
		if strings.Contains(ev.data, recB.ID) || strings.Contains(ev.data, "secret-conv-of-b") || strings.Contains(ev.data, "tenant-b") {
			t.Fatalf("tenant A's stream carried tenant B's context: %s %s", ev.name, ev.data)
		}
	}
}

// TestContextEventsNeedKey: the live feed is behind the API key.
func TestContextEventsNeedKey(t *testing.T) {
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1})
	defer m.Close(context.Background())
	e := newEnv(t, func(c *server.Config) { c.Contexts, c.Live = m, m })
	if w := e.do(t, req{method: "GET", path: "/v1/contexts/events"}); w.Code != 401 {
		t.Fatalf("no key: %d %s", w.Code, w.Body)
	}
}

// TestSetTTL: PUT /v1/contexts/{id}/ttl moves the expiry of the caller's
// context; another tenant's is a 404, a TTL out of bounds a 400.
func TestSetTTL(t *testing.T) {
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1})
	defer m.Close(context.Background())
	e := newEnv(t, func(c *server.Config) { c.Contexts, c.Live = m, m })
	rec, err := m.GetOrCreate(context.Background(), contexts.Identity{TenantID: "tenant-a", ConversationID: "c"}, contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
		body      any
		want      int
	}{
		{"own", e.KeyA, map[string]int{"ttlSeconds": 3600}, 200},
		{"other tenant", e.KeyB, map[string]int{"ttlSeconds": 3600}, 404},
		{"zero", e.KeyA, map[string]int{"ttlSeconds": 0}, 400},
		{"too long", e.KeyA, map[string]int{"ttlSeconds": 86401}, 400},
		{"unknown field", e.KeyA, map[string]any{"ttl": 5}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do(t, req{method: "PUT", path: "/v1/contexts/" + rec.ID + "/ttl", key: tc.key, body: tc.body})
			if w.Code != tc.want {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if tc.want == 200 {
				var c api.Context
				if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || c.ExpiresAt.Sub(c.LastUsedAt) != time.Hour {
					t.Fatalf("%v %s", err, w.Body)
				}
			}
		})
	}
}

// TestContextEventsEndOnDrain: a daemon shutting down ends the live
// streams (they would hold its graceful shutdown to its deadline).
func TestContextEventsEndOnDrain(t *testing.T) {
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1})
	defer m.Close(context.Background())
	e := newEnv(t, func(c *server.Config) { c.Contexts, c.Live = m, m })
	ts := httptest.NewServer(e.Handler)
	t.Cleanup(ts.Close)
	stream := openEvents(t, ts.URL, e.KeyA)
	waitEvent(t, stream, "the snapshot", func(ev sseEvent) bool { return ev.name == "snapshot" })
	e.Server.Drain()
	select {
	case _, open := <-stream:
		for open {
			_, open = <-stream
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream outlived the drain by 30 s")
	}
}
