package control_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
)

func TestControlPlane(t *testing.T) {
	e := newEnv(t)
	t.Run("auth", func(t *testing.T) {
		for _, key := range []string{"", "e2b_bad"} {
			resp := e.Do("POST", "/v2/sandboxes", strings.NewReader(`{"templateID":"base"}`), "X-API-KEY", key)
			if resp.StatusCode != 401 {
				t.Fatalf("key %q: status %d", key, resp.StatusCode)
			}
			if got := decode[apiErr](t, resp); got.Code != 401 || got.Message == "" {
				t.Fatalf("key %q: body %+v", key, got)
			}
		}
	})
	sb := e.Create(key1, `{"templateID":"code-interpreter-v1","timeout":60,"metadata":{"team":"a"}}`)
	if sb.SandboxID == "" || sb.TemplateID != "code-interpreter-v1" || sb.ClientID == "" || sb.EnvdVersion != e2bcompat.EnvdVersion || sb.EnvdAccessToken == "" {
		t.Fatalf("create answer %+v", sb)
	}
	t.Run("v1 create", func(t *testing.T) {
		resp := e.Do("POST", "/sandboxes", strings.NewReader(`{"templateID":"base","metadata":{"team":"b"}}`), "X-API-KEY", key1)
		if resp.StatusCode != 201 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("identity from metadata", func(t *testing.T) {
		a := e.Create(key1, `{"metadata":{"conversationId":"conv-x","pathId":"p1"}}`)
		b := e.Create(key1, `{"metadata":{"conversationId":"conv-x","pathId":"p1"}}`)
		if a.SandboxID != b.SandboxID {
			t.Fatalf("same identity gave two sandboxes %s %s", a.SandboxID, b.SandboxID)
		}
	})
	t.Run("info", func(t *testing.T) {
		resp := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
		got := decode[struct {
			SandboxID, State string
			Metadata         map[string]string
		}](t, resp)
		if got.SandboxID != sb.SandboxID || got.State != "running" || got.Metadata["team"] != "a" || got.Metadata["sandlot.e2bTemplate"] != "" {
			t.Fatalf("info %+v", got)
		}
		if resp := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key2); resp.StatusCode != 404 {
			t.Fatalf("other tenant sees the sandbox: %d", resp.StatusCode)
		}
	})
	t.Run("list paging and metadata", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			e.Create(key1, `{"metadata":{"team":"page"}}`)
		}
		seen := map[string]bool{}
		next := ""
		for pages := 0; ; pages++ {
			q := "/v2/sandboxes?limit=2&metadata=team%3Dpage"
			if next != "" {
				q += "&nextToken=" + next
			}
			resp := e.Do("GET", q, nil, "X-API-KEY", key1)
			items := decode[[]struct{ SandboxID string }](t, resp)
			for _, it := range items {
				seen[it.SandboxID] = true
			}
			next = resp.Header.Get("X-Next-Token")
			if next == "" {
				break
			}
			if pages > 3 {
				t.Fatal("paging does not end")
			}
		}
		if len(seen) != 3 {
			t.Fatalf("listed %d sandboxes, want 3", len(seen))
		}
		resp := e.Do("GET", "/v2/sandboxes?state=paused", nil, "X-API-KEY", key1)
		if items := decode[[]any](t, resp); len(items) != 0 {
			t.Fatalf("paused list with nothing paused: %v", items)
		}
	})
	t.Run("timeout and refresh", func(t *testing.T) {
		for _, p := range []string{"/timeout", "/refreshes"} {
			resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+p, strings.NewReader(`{"timeout":120,"duration":30}`), "X-API-KEY", key1)
			if resp.StatusCode != 204 {
				t.Fatalf("%s: %d", p, resp.StatusCode)
			}
		}
	})
	t.Run("connect", func(t *testing.T) {
		resp := e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":30}`), "X-API-KEY", key1)
		if got := decode[created](t, resp); resp.StatusCode != 200 || got.EnvdAccessToken == "" || got.TrafficAccessToken == "" {
			t.Fatalf("connect %d %+v", resp.StatusCode, got)
		}
	})
	t.Run("pause and resume", func(t *testing.T) {
		pausePath := "/sandboxes/" + sb.SandboxID + "/pause"
		state := func() string {
			return decode[struct{ State string }](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)).State
		}
		listed := func(q string) bool {
			for _, it := range decode[[]struct{ SandboxID, State string }](t, e.Do("GET", "/v2/sandboxes"+q, nil, "X-API-KEY", key1)) {
				if it.SandboxID == sb.SandboxID {
					return true
				}
			}
			return false
		}
		if resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/resume", nil, "X-API-KEY", key1); resp.StatusCode != 409 {
			t.Fatalf("resume of a running sandbox: %d, want 409", resp.StatusCode)
		}
		if resp := e.Do("POST", pausePath, strings.NewReader(`{"memory":false}`), "X-API-KEY", key1); resp.StatusCode != 412 {
			// A suspend to disk captures the sandbox's layer, which this
			// provider cannot (TestSnapshotRoutes has one that can).
			t.Fatalf("pause without memory on a provider without capture: %d, want 412 (not supported)", resp.StatusCode)
		}
		if resp := e.Do("POST", pausePath, nil, "X-API-KEY", key2); resp.StatusCode != 404 {
			t.Fatalf("another tenant's pause: %d, want 404", resp.StatusCode)
		}
		if resp := e.Do("POST", pausePath, strings.NewReader(`{"memory":true}`), "X-API-KEY", key1); resp.StatusCode != 204 {
			t.Fatalf("pause %d", resp.StatusCode)
		}
		resp := e.Do("POST", pausePath, nil, "X-API-KEY", key1)
		if got := decode[apiErr](t, resp); resp.StatusCode != 409 || got.Code != 409 || !strings.Contains(got.Message, "already paused") {
			t.Fatalf("second pause: %d %+v, want 409", resp.StatusCode, got)
		}
		if st := state(); st != "paused" {
			t.Fatalf("state %q, want paused", st)
		}
		if !listed("") || !listed("?state=paused") || listed("?state=running") || !listed("?state=running,paused") {
			t.Fatal("the state filter does not select the paused sandbox")
		}
		for _, port := range []string{"49983", "49999"} {
			if resp := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", port, "X-Access-Token", sb.EnvdAccessToken); resp.StatusCode != 502 {
				t.Fatalf("port %s of a paused sandbox: %d, want 502", port, resp.StatusCode)
			}
		}
		if resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", strings.NewReader(`{"timeout":60}`), "X-API-KEY", key1); resp.StatusCode != 409 {
			t.Fatalf("setTimeout of a paused sandbox: %d, want 409", resp.StatusCode)
		}
		if resp := e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":60,"memory":false}`), "X-API-KEY", key1); resp.StatusCode != 412 {
			t.Fatalf("connect with onResume reboot on a provider without capture: %d, want 412 (not supported)", resp.StatusCode)
		}
		resp = e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":60}`), "X-API-KEY", key1)
		if got := decode[created](t, resp); resp.StatusCode != 201 || got.EnvdAccessToken == "" {
			t.Fatalf("connect to a paused sandbox: %d %+v, want 201", resp.StatusCode, got)
		}
		if st := state(); st != "running" {
			t.Fatalf("state after connect %q", st)
		}
		if resp := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken); resp.StatusCode != 204 {
			t.Fatalf("health after resume: %d", resp.StatusCode)
		}
		// The older resume route: 201, its own default timeout (15 s).
		e.Do("POST", pausePath, nil, "X-API-KEY", key1)
		resp = e.Do("POST", "/sandboxes/"+sb.SandboxID+"/resume", strings.NewReader(`{"autoPause":false}`), "X-API-KEY", key1)
		if resp.StatusCode != 201 {
			t.Fatalf("resume %d", resp.StatusCode)
		}
		end := decode[struct{ EndAt time.Time }](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)).EndAt
		if d := time.Until(end); d > 16*time.Second || d < 5*time.Second {
			t.Fatalf("resumed without a timeout: ends in %s, want E2B's 15 s", d)
		}
	})
	t.Run("kill twice", func(t *testing.T) {
		if resp := e.Do("DELETE", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1); resp.StatusCode != 204 {
			t.Fatalf("first kill %d", resp.StatusCode)
		}
		resp := e.Do("DELETE", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("second kill %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if got := decode[apiErr](t, resp); got.Code != 404 || got.Message == "" {
			t.Fatalf("404 body %+v", got)
		}
		// sandbox calls to a killed sandbox: the proxy's 502
		resp = e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken)
		if resp.StatusCode != 502 {
			t.Fatalf("health of killed sandbox: %d", resp.StatusCode)
		}
		// and the code interpreter's: 404, as E2B (NotFoundError in the SDK)
		resp = e.Do("POST", "/execute", strings.NewReader(`{"code":"1"}`), e.Headers(sb, "49999")...)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("execute on a killed sandbox: %d", resp.StatusCode)
		}
	})
}

// A timeout above the maximum (24 h) is a 400, as on E2B; before, any
// timeout was taken.
func TestTimeoutMaximum(t *testing.T) {
	e := newEnv(t)
	max := int64(e2bcompat.DefaultMaxTimeout / time.Second)
	over := strings.NewReplacer("N", itoa(max+1))
	sb := e.Create(key1, `{"timeout":`+itoa(max)+`}`)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v2/sandboxes", `{"timeout":N}`},
		{"POST", "/sandboxes", `{"timeout":N}`},
		{"POST", "/sandboxes/" + sb.SandboxID + "/timeout", `{"timeout":N}`},
		{"POST", "/sandboxes/" + sb.SandboxID + "/refreshes", `{"duration":N}`},
		{"POST", "/v2/sandboxes/" + sb.SandboxID + "/connect", `{"timeout":N}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp := e.Do(tc.method, tc.path, strings.NewReader(over.Replace(tc.body)), "X-API-KEY", key1)
			got := decode[apiErr](t, resp)
			if resp.StatusCode != 400 || got.Code != 400 || !strings.Contains(got.Message, "24 hours") {
				t.Fatalf("status %d %+v, want 400 naming the maximum", resp.StatusCode, got)
			}
		})
	}
	if resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", strings.NewReader(`{"timeout":`+itoa(max)+`}`), "X-API-KEY", key1); resp.StatusCode != 204 {
		t.Fatalf("timeout at the maximum: %d", resp.StatusCode)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
