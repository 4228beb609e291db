package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/guardtest"
	"github.com/sandlot/sandlot/store/memory"
)

// TestFilesGuardRealSandbox attacks E2B GET /files on real sandboxes (the
// local provider) behind the real guard: files written inside the sandbox
// with a leading NUL or invalid UTF-8 byte, a 3 MiB file with secrets at
// the chunk boundaries (it must come back exactly as the original with each
// secret replaced), and a PNG with a secret in a tEXt chunk.
func TestFilesGuardRealSandbox(t *testing.T) {
	t.Parallel()
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), sandboxProvider(t), contexts.Config{PoolSize: -1, Guard: g, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	srv := httptest.NewServer(e2bcompat.New(e2bcompat.Config{Manager: m, Tenants: e2bcompattest.Tenants{apiKey: "tenant-files"}}))
	t.Cleanup(srv.Close)

	do := func(t *testing.T, method, path string, body io.Reader, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, body)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := do(t, "POST", "/v2/sandboxes", strings.NewReader(`{"templateID":"base"}`), "X-API-KEY", apiKey, "Content-Type", "application/json")
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ SandboxID, EnvdAccessToken string }
	json.Unmarshal(body, &sb)
	hdr := []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken}
	t.Cleanup(func() { do(t, "DELETE", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", apiKey) })

	// put writes data into the real sandbox's file system.
	put := func(t *testing.T, path string, data []byte) {
		t.Helper()
		code, body := do(t, "POST", "/files?path="+path, bytes.NewReader(data), append(hdr, "Content-Type", "application/octet-stream")...)
		if code != 200 {
			t.Fatalf("write %s: %d %s", path, code, body)
		}
	}
	get := func(t *testing.T, path string) []byte {
		t.Helper()
		code, body := do(t, "GET", "/files?path="+path, nil, hdr...)
		if code != 200 {
			t.Fatalf("GET /files %s: %d %s", path, code, body)
		}
		return body
	}

	text, red := guardtest.SecretText()
	for _, tc := range []struct{ name, prefix string }{{"NUL prefix", "\x00"}, {"invalid UTF-8 prefix", "\xff"}} {
		t.Run(tc.name, func(t *testing.T) {
			put(t, "/home/user/f.txt", []byte(tc.prefix+text))
			if got := string(get(t, "/home/user/f.txt")); got != tc.prefix+red {
				t.Fatalf("GET /files = %q, want %q", got, tc.prefix+red)
			}
		})
	}
	t.Run("3 MiB exact", func(t *testing.T) {
		file, want := guardtest.LargeText(3<<20, agent.ChunkSize)
		put(t, "/home/user/big.txt", []byte(file))
		if got := string(get(t, "/home/user/big.txt")); got != want {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%d bytes, want %d; first difference at %d: got %q", len(got), len(want), i, got[max(0, i-20):min(len(got), i+40)])
		}
	})
	t.Run("PNG", func(t *testing.T) {
		email := guardtest.Email()
		img := guardtest.PNG("Comment", "for "+email)
		put(t, "/home/user/plot.png", img)
		got := get(t, "/home/user/plot.png")
		if bytes.Contains(got, []byte(email)) || len(got) != len(img) {
			t.Fatalf("PNG: %d bytes (want %d), secret present %v", len(got), len(img), bytes.Contains(got, []byte(email)))
		}
		if _, err := png.Decode(bytes.NewReader(got)); err != nil {
			t.Fatalf("the guarded PNG does not decode: %v", err)
		}
	})
}
