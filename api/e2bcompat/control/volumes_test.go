package control_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestVolumesOff: a server without volumes answers the volume routes and a
// create with volumeMounts with a status saying so, never a sandbox that
// silently lacks its volume.
func TestVolumesOff(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/volumes", `{"name":"data"}`},
		{"GET", "/volumes", ""},
		{"GET", "/volumes/volabc", ""},
		{"DELETE", "/volumes/volabc", ""},
		{"POST", "/v2/sandboxes", `{"templateID":"base","volumeMounts":[{"name":"data","path":"/mnt/data"}]}`},
	} {
		resp := e.Do(tc.method, tc.path, strings.NewReader(tc.body), "X-API-KEY", key1, "Content-Type", "application/json")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || resp.StatusCode == http.StatusNotFound || !strings.Contains(string(b), "volumes are not enabled") {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, b)
		}
	}
	list := e.Do("GET", "/v2/sandboxes", nil, "X-API-KEY", key1)
	b, _ := io.ReadAll(list.Body)
	list.Body.Close()
	if strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("a sandbox was created: %s", b)
	}
}
