package e2b

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

// TestCallUser: a call as root reaches envd as root (Basic auth on RPCs, the
// username query on /files), never as the sandbox's default user; a call
// as the default user sends neither, as the SDKs do.
func TestCallUser(t *testing.T) {
	var auth, username string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, username = r.Header.Get("Authorization"), r.URL.Query().Get("username")
	}))
	defer srv.Close()
	c := &http.Client{Transport: &headerTransport{hdr: http.Header{}}}
	for _, tc := range []struct {
		user, path, auth, username string
	}{
		{agent.RootUser, "/files?path=/root/x", "Basic cm9vdDo=", "root"},
		{agent.RootUser, "/filesystem.Filesystem/Stat", "Basic cm9vdDo=", ""},
		{"", "/files?path=x", "", ""},
		{agent.DefaultUser, "/process.Process/Start", "", ""},
	} {
		req, _ := http.NewRequestWithContext(agent.WithUser(context.Background(), tc.user), "GET", srv.URL+tc.path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if auth != tc.auth || username != tc.username {
			t.Errorf("%q %s: Authorization %q username %q, want %q %q", tc.user, tc.path, auth, username, tc.auth, tc.username)
		}
	}
}
