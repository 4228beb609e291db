package envd_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWatcherRPCs: the unary watcher calls the Python SDK's sync watch_dir
// makes, in Connect's JSON (camelCase field names, enum names): create,
// poll events, remove; then the watcher is gone.
func TestWatcherRPCs(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	call := func(method, body string) (int, map[string]any) {
		t.Helper()
		resp := fsCall(e, sb, method, body)
		return resp.StatusCode, decode[map[string]any](t, resp)
	}
	write := func(path, data string) {
		t.Helper()
		resp := e.Do("POST", "/files?path="+path, bytes.NewReader([]byte(data)), append(e.Headers(sb, "49983"), "Content-Type", "application/octet-stream")...)
		if resp.StatusCode != 200 {
			t.Fatalf("write %s: %d", path, resp.StatusCode)
		}
	}
	write("/home/user/w/keep.txt", "1")
	status, body := call("CreateWatcher", `{"path":"/home/user/w"}`)
	id, _ := body["watcherId"].(string)
	if status != 200 || id == "" {
		t.Fatalf("create: %d %v", status, body)
	}
	write("/home/user/w/new.txt", "hello")
	write("/home/user/w/keep.txt", "changed")
	type ev struct{ Name, Type string }
	var got []ev
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		status, body := call("GetWatcherEvents", `{"watcherId":"`+id+`"}`)
		if status != 200 {
			t.Fatalf("events: %d %v", status, body)
		}
		evs, _ := body["events"].([]any)
		for _, x := range evs {
			m := x.(map[string]any)
			got = append(got, ev{m["name"].(string), m["type"].(string)})
		}
	}
	want := []ev{{"keep.txt", "EVENT_TYPE_WRITE"}, {"new.txt", "EVENT_TYPE_CREATE"}, {"new.txt", "EVENT_TYPE_WRITE"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if status, body := call("RemoveWatcher", `{"watcherId":"`+id+`"}`); status != 200 {
		t.Fatalf("remove: %d %v", status, body)
	}
	if status, body := call("GetWatcherEvents", `{"watcherId":"`+id+`"}`); status != 404 || body["code"] != "not_found" {
		t.Fatalf("events of a removed watcher: %d %v", status, body)
	}
	if status, _ := call("CreateWatcher", `{"path":"/home/user/w/keep.txt"}`); status != 400 {
		t.Fatalf("watching a file: %d, want 400", status)
	}
	// a sandbox has a bounded number of watchers
	var ids []string
	for i := range 16 {
		status, body := call("CreateWatcher", `{"path":"/home/user/w"}`)
		if status != 200 {
			t.Fatalf("watcher %d: %d %v", i, status, body)
		}
		ids = append(ids, body["watcherId"].(string))
	}
	if status, body := call("CreateWatcher", `{"path":"/home/user/w"}`); status != 429 || body["code"] != "resource_exhausted" {
		t.Fatalf("17th watcher: %d %v", status, body)
	}
	// At the limit, a removed watcher's place is free as soon as the
	// remove answers.
	for i := range 8 {
		if status, body := call("RemoveWatcher", `{"watcherId":"`+ids[i]+`"}`); status != 200 {
			t.Fatalf("remove %d: %d %v", i, status, body)
		}
		status, body := call("CreateWatcher", `{"path":"/home/user/w"}`)
		if status != 200 {
			t.Fatalf("create right after a remove at the limit (%d): %d %v", i, status, body)
		}
		ids[i] = body["watcherId"].(string)
	}
}
