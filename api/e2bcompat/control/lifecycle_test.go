package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
)

type listed struct {
	SandboxID  string
	TemplateID string
	StartedAt  time.Time
	EndAt      time.Time
	Metadata   map[string]string
}

// TestListFiltersAndOrder: GET /v2/sandboxes honours template,
// startedAfter and order (by start time, newest first by default, across
// pages) as E2B's v2 list does.
func TestListFiltersAndOrder(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i, tmpl := range []string{"base", "code-interpreter-v1", "base", "base"} {
		sb := e.Create(key1, `{"templateID":"`+tmpl+`","metadata":{"n":"`+strconv.Itoa(i)+`"}}`)
		ids = append(ids, sb.SandboxID)
		time.Sleep(2 * time.Millisecond) // distinct start times
	}
	e.Create(key2, `{}`) // another tenant's: never listed
	list := func(q string) ([]string, string) {
		t.Helper()
		resp := e.Do("GET", "/v2/sandboxes?"+q, nil, "X-API-KEY", key1)
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("list %s: %d %s", q, resp.StatusCode, b)
		}
		var out []string
		for _, l := range decode[[]listed](t, resp) {
			out = append(out, l.SandboxID)
		}
		return out, resp.Header.Get("X-Next-Token")
	}
	rev := func(s ...string) []string {
		out := append([]string(nil), s...)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	all, _ := list("")
	if diff := cmp.Diff(rev(ids...), all); diff != "" {
		t.Fatalf("default order (newest first) (-want +got):\n%s", diff)
	}
	asc, _ := list("order=asc")
	if diff := cmp.Diff(ids, asc); diff != "" {
		t.Fatalf("order=asc (-want +got):\n%s", diff)
	}
	base, _ := list("template=base&order=asc")
	if diff := cmp.Diff([]string{ids[0], ids[2], ids[3]}, base); diff != "" {
		t.Fatalf("template=base (-want +got):\n%s", diff)
	}
	// startedAfter: the third sandbox's start, taken from its detail
	resp := e.Do("GET", "/sandboxes/"+ids[2], nil, "X-API-KEY", key1)
	third := decode[listed](t, resp).StartedAt
	after, _ := list("order=asc&startedAfter=" + url.QueryEscape(third.Format(time.RFC3339Nano)))
	if diff := cmp.Diff(ids[2:], after); diff != "" {
		t.Fatalf("startedAfter (-want +got):\n%s", diff)
	}
	// paging keeps the order across pages
	var paged []string
	q := "order=asc&limit=3"
	for {
		page, next := list(q)
		paged = append(paged, page...)
		if next == "" {
			break
		}
		q = "order=asc&limit=3&nextToken=" + url.QueryEscape(next)
	}
	if diff := cmp.Diff(ids, paged); diff != "" {
		t.Fatalf("paged asc (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"order=up", "startedAfter=yesterday", "nextToken=zz", "limit=0"} {
		if r := e.Do("GET", "/v2/sandboxes?"+bad, nil, "X-API-KEY", key1); r.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400", bad, r.StatusCode)
		}
	}
	// reserved metadata keys are not a filter a caller may use
	if got, _ := list("metadata=" + url.QueryEscape("sandlot.e2bTemplate=base")); len(got) != 4 {
		t.Errorf("reserved metadata filter applied: %v", got)
	}
}

// TestInfoMetadataIsTheCallers: getInfo shows the metadata as given, not
// sandlot's identity keys.
func TestInfoMetadataIsTheCallers(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{"metadata":{"a":"1"}}`)
	got := decode[listed](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)).Metadata
	if diff := cmp.Diff(map[string]string{"a": "1"}, got); diff != "" {
		t.Fatalf("metadata (-want +got):\n%s", diff)
	}
}

// TestPastItsEndSandboxIsGone: past its end a sandbox is not running for any
// route, before the cleanup loop ends it: getInfo 404, envd 502, not listed.
func TestPastItsEndSandboxIsGone(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{"timeout":1}`)
	if r := e.Do("GET", "/health", nil, e.Headers(sb, "49983")...); r.StatusCode != 204 {
		t.Fatalf("health before the end: %d", r.StatusCode)
	}
	time.Sleep(1100 * time.Millisecond)
	if r := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1); r.StatusCode != 404 {
		t.Fatalf("getInfo after the end: %d, want 404", r.StatusCode)
	}
	if r := e.Do("GET", "/health", nil, e.Headers(sb, "49983")...); r.StatusCode != 502 {
		t.Fatalf("health after the end: %d, want 502", r.StatusCode)
	}
	if l := decode[[]listed](t, e.Do("GET", "/v2/sandboxes", nil, "X-API-KEY", key1)); len(l) != 0 {
		t.Fatalf("listed after the end: %v", l)
	}
}

// TestMetrics: real samples with the fields both SDKs read (the Python SDK
// needs memCache and timestampUnix), CPU as a share of the sandbox's core,
// and start/end honoured.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	e.P.SetUsage(sb.SandboxID, contexts.ResourceUsage{MemoryBytes: 300 << 20, CacheBytes: 100 << 20, CPUTimeMs: 0, DiskBytes: 4096})
	get := func(q string) []map[string]any {
		t.Helper()
		resp := e.Do("GET", "/sandboxes/"+sb.SandboxID+"/metrics"+q, nil, "X-API-KEY", key1)
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("metrics%s: %d %s", q, resp.StatusCode, b)
		}
		return decode[[]map[string]any](t, resp)
	}
	first := get("")
	if len(first) != 1 {
		t.Fatalf("samples %v", first)
	}
	m := first[0]
	for k, want := range map[string]float64{"memUsed": 200 << 20, "memCache": 100 << 20, "memTotal": 2 << 30, "diskUsed": 4096, "diskTotal": 512 << 20, "cpuCount": 1} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	ts, ok := m["timestampUnix"].(float64)
	if !ok || int64(ts) > time.Now().Unix() || int64(ts) < time.Now().Unix()-5 {
		t.Errorf("timestampUnix %v", m["timestampUnix"])
	}
	time.Sleep(1100 * time.Millisecond)
	e.P.SetUsage(sb.SandboxID, contexts.ResourceUsage{MemoryBytes: 300 << 20, CPUTimeMs: 550})
	second := get("")
	if len(second) != 2 {
		t.Fatalf("want two samples, got %v", second)
	}
	if pct := second[1]["cpuUsedPct"].(float64); pct < 20 || pct > 55 {
		t.Errorf("cpuUsedPct %v for 550 ms of CPU in about 1.1 s", pct)
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	if got := get("?start=" + future); len(got) != 0 {
		t.Errorf("start in the future: %v", got)
	}
	if got := get("?end=" + strconv.FormatInt(int64(ts), 10)); len(got) != 1 {
		t.Errorf("end at the first sample: %d samples", len(got))
	}
	if r := e.Do("GET", "/sandboxes/"+sb.SandboxID+"/metrics?start=x", nil, "X-API-KEY", key1); r.StatusCode != 400 {
		t.Errorf("bad start: %d", r.StatusCode)
	}
}

// TestSnapshotWithoutTemplates: without a catalog (no image store) a
// snapshot and a fork are 412 and the list empty; an unknown sandbox is
// 404 (the SDK's SandboxNotFoundError).
func TestSnapshotWithoutTemplates(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	for _, p := range []string{"snapshots", "fork"} {
		if r := e.Do("POST", "/sandboxes/nope/"+p, strings.NewReader(`{}`), "X-API-KEY", key1); r.StatusCode != 404 {
			t.Errorf("%s of an unknown sandbox: %d", p, r.StatusCode)
		}
		resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/"+p, strings.NewReader(`{}`), "X-API-KEY", key1)
		body, _ := io.ReadAll(resp.Body)
		var ae apiErr
		json.Unmarshal(body, &ae)
		if resp.StatusCode != 412 || !strings.Contains(ae.Message, "not enabled") {
			t.Errorf("%s without templates: %d %s", p, resp.StatusCode, body)
		}
	}
	if l := decode[[]any](t, e.Do("GET", "/snapshots", nil, "X-API-KEY", key1)); len(l) != 0 {
		t.Errorf("snapshots %v", l)
	}
}

// TestDefaultTimeout: a create without a timeout gets E2B's five minutes
// (the JS SDK leaves it out unless the caller sets one), so a connect
// asking for ten extends it, as E2B's connect test expects.
func TestDefaultTimeout(t *testing.T) {
	// The manager's default TTL (30 minutes) is not E2B's.
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Manager: contexts.Config{TTL: 30 * time.Minute}})
	sb := e.Create(key1, `{"templateID":"base"}`)
	info := func() listed {
		t.Helper()
		return decode[listed](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1))
	}
	before := info()
	if got := before.EndAt.Sub(before.StartedAt); got < 299*time.Second || got > 301*time.Second {
		t.Fatalf("endAt - startedAt = %v, want E2B's default 5m", got)
	}
	resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":600}`), "X-API-KEY", key1, "Content-Type", "application/json")
	if resp.StatusCode != 200 {
		t.Fatalf("connect: %d", resp.StatusCode)
	}
	if after := info(); !after.EndAt.After(before.EndAt.Add(290 * time.Second)) {
		t.Fatalf("connect with 600 s: endAt %v, was %v", after.EndAt, before.EndAt)
	}
}

// TestAutoPause: a sandbox created with autoPause (the SDK's lifecycle
// onTimeout 'pause') is paused at its timeout, not gone: getInfo says
// paused, connect resumes it (201). A pause without memory on timeout is
// refused as not supported, and autoResume with it as E2B refuses it.
func TestAutoPause(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		// This daemon keeps no images (no catalog): a pause without
		// memory cannot be kept (TestAutoPauseToDisk has one).
		{`{"autoPause":true,"autoPauseMemory":false}`, 412, "keeps no images"},
		{`{"autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":true}}`, 400, "cannot be combined"},
	} {
		resp := e.Do("POST", "/v2/sandboxes", strings.NewReader(tc.body), "X-API-KEY", key1)
		if got := decode[apiErr](t, resp); resp.StatusCode != tc.status || !strings.Contains(got.Message, tc.want) {
			t.Fatalf("create %s: %d %+v, want %d %s", tc.body, resp.StatusCode, got, tc.status, tc.want)
		}
	}
	auto := e.Create(key1, `{"timeout":1,"autoPause":true}`)
	plain := e.Create(key1, `{"timeout":1,"autoPause":false}`)
	time.Sleep(1200 * time.Millisecond)
	info := decode[struct{ State string }](t, e.Do("GET", "/sandboxes/"+auto.SandboxID, nil, "X-API-KEY", key1))
	if info.State != "paused" {
		t.Fatalf("autoPause sandbox past its timeout: state %q, want paused", info.State)
	}
	if resp := e.Do("GET", "/sandboxes/"+plain.SandboxID, nil, "X-API-KEY", key1); resp.StatusCode != 404 {
		t.Fatalf("plain sandbox past its timeout: %d, want 404", resp.StatusCode)
	}
	resp := e.Do("POST", "/v2/sandboxes/"+auto.SandboxID+"/connect", strings.NewReader(`{"timeout":60}`), "X-API-KEY", key1)
	if resp.StatusCode != 201 {
		t.Fatalf("connect to the auto-paused sandbox: %d, want 201", resp.StatusCode)
	}
	if got := decode[struct{ Metadata map[string]string }](t, e.Do("GET", "/sandboxes/"+auto.SandboxID, nil, "X-API-KEY", key1)); len(got.Metadata) != 0 {
		t.Fatalf("metadata shows sandlot's keys: %v", got.Metadata)
	}
}

// TestAutoResume: a sandbox created with autoPause and autoResume is
// paused at its timeout and resumed by the next sandbox call, which waits
// for the resume and succeeds (E2B's lifecycle autoResume); the sandbox
// runs again with its create's timeout. Without autoResume the same call
// answers 502, the sandbox stays paused. An unauthenticated call wakes
// nothing.
func TestAutoResume(t *testing.T) {
	e := newEnv(t)
	wakes := e.Create(key1, `{"timeout":1,"autoPause":true,"autoResume":{"enabled":true}}`)
	sleeps := e.Create(key1, `{"timeout":1,"autoPause":true,"autoResume":{"enabled":false}}`)
	time.Sleep(1200 * time.Millisecond)
	state := func(sb created) string {
		t.Helper()
		return decode[struct{ State string }](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)).State
	}
	for _, sb := range []created{wakes, sleeps} {
		if got := state(sb); got != "paused" {
			t.Fatalf("%s past its timeout: state %q, want paused", sb.SandboxID, got)
		}
	}
	if r := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", wakes.SandboxID, "E2b-Sandbox-Port", "49983"); r.StatusCode != 401 {
		t.Fatalf("health without credentials: %d, want 401", r.StatusCode)
	}
	if got := state(wakes); got != "paused" {
		t.Fatalf("an unauthenticated call woke the sandbox: state %q", got)
	}
	if r := e.Do("GET", "/health", nil, e.Headers(wakes, "49983")...); r.StatusCode != 204 {
		t.Fatalf("health of the auto-resume sandbox: %d, want 204 (resumed)", r.StatusCode)
	}
	if got := state(wakes); got != "running" {
		t.Fatalf("after traffic: state %q, want running", got)
	}
	if r := e.Do("GET", "/health", nil, e.Headers(sleeps, "49983")...); r.StatusCode != 502 {
		t.Fatalf("health of the paused sandbox without autoResume: %d, want 502", r.StatusCode)
	}
	if got := state(sleeps); got != "paused" {
		t.Fatalf("without autoResume: state %q, want paused", got)
	}
	if _, err := e.H.Wake(context.Background(), "tenant-1", sleeps.SandboxID); !errors.Is(err, e2bcompat.ErrPausedNoWake) {
		t.Fatalf("Wake without autoResume: %v, want ErrPausedNoWake", err)
	}
	if resumed, err := e.H.Wake(context.Background(), "tenant-1", wakes.SandboxID); err != nil || resumed {
		t.Fatalf("Wake of a running sandbox: %v %v, want no resume", resumed, err)
	}
}

// wokenFirst is a manager whose Resume finds the context woken by someone
// else first: it resumes it, then answers the caller's resume as the
// manager would then (ErrNotPaused).
type wokenFirst struct{ *contexts.Manager }

func (m wokenFirst) Resume(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error) {
	if _, err := m.Manager.Resume(ctx, tenantID, contextID, ttl); err != nil {
		return nil, err
	}
	return m.Manager.Resume(ctx, tenantID, contextID, ttl)
}

// TestConnectWokenMeanwhile: a paused sandbox woken between connect's read
// and its resume (traffic, another connect) is running, which is what
// connect asks for: 200 with the sandbox, not 409 "already running".
func TestConnectWokenMeanwhile(t *testing.T) {
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Wrap: func(m *contexts.Manager) e2bcompat.Manager { return wokenFirst{m} }})
	sb := e.Create(key1, `{"timeout":60}`)
	if resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, "X-API-KEY", key1); resp.StatusCode != 204 {
		t.Fatalf("pause: %d", resp.StatusCode)
	}
	resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":60}`), "X-API-KEY", key1)
	got := decode[struct{ SandboxID string }](t, resp)
	if resp.StatusCode != 200 || got.SandboxID != sb.SandboxID {
		t.Fatalf("connect to a sandbox woken meanwhile: %d %+v, want 200 with the sandbox", resp.StatusCode, got)
	}
}
