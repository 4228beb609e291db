package ports

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestWallForwardedHeaders attacks what the sandbox's app believes about
// its caller: forwarding headers the caller wrote (a forged client
// address, a path prefix in the host form) never reach the sandbox; the
// route sets them from what it saw itself.
func TestWallForwardedHeaders(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, host, path string
		prefix           string
	}{
		{"host form", Host(DefaultDomain, "public", 8080), "/", ""},
		{"path form", "", "/v1/contexts/public/ports/8080/x", "/v1/contexts/public/ports/8080/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", f.srv.URL+tc.path, nil)
			if tc.host != "" {
				req.Host = tc.host
			}
			for k, v := range map[string]string{
				"X-Forwarded-For":    "6.6.6.6",
				"Forwarded":          "for=6.6.6.6;host=evil.test",
				"X-Real-Ip":          "6.6.6.6",
				"X-Forwarded-Prefix": "/evil/",
			} {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var s seen
			if err := json.Unmarshal(b, &s); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			want := seen{ForwardedFor: "127.0.0.1", Prefix: tc.prefix}
			got := seen{ForwardedFor: s.ForwardedFor, Forwarded: s.Forwarded, RealIP: s.RealIP, Prefix: s.Prefix}
			if got != want {
				t.Errorf("the sandbox saw %+v, want %+v", got, want)
			}
		})
	}
}
