package envd_test

import (
	"bytes"
	"image/png"
	"io"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/guardtest"
)

// newGuardedEnv is the E2B surface over the real context manager and the
// real guard (memory store, fake provider), as `sandlot serve` wires them.
func newGuardedEnv(t *testing.T) *env {
	t.Helper()
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newManagerEnv(t, contexts.Config{Guard: g})
	return e
}

// roundTrip uploads data to path with POST /files and reads it back with
// GET /files.
func roundTrip(e *env, sb created, path string, data []byte) []byte {
	e.T.Helper()
	hdr := e.Headers(sb, "49983")
	resp := e.Do("POST", "/files?path="+path, bytes.NewReader(data), append(hdr, "Content-Type", "application/octet-stream")...)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		e.T.Fatalf("upload %s: %d %s", path, resp.StatusCode, b)
	}
	resp = e.Do("GET", "/files?path="+path, nil, hdr...)
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err != nil {
		e.T.Fatalf("read %s: %d %v %s", path, resp.StatusCode, err, b)
	}
	return b
}

// TestFilesGuarded: GET /files hands out what the guard lets out, whatever
// the file looks like: text with a NUL or an invalid UTF-8 byte is text;
// a PNG keeps its length and structure with its text masked; a 3 MiB file
// with secrets at the chunk boundaries comes back exactly as the original
// with each secret replaced (the read offset follows the file, not the
// redacted output).
func TestFilesGuarded(t *testing.T) {
	e := newGuardedEnv(t)
	sb := e.Create(key1, `{}`)
	text, red := guardtest.SecretText()
	for _, tc := range []struct{ name, prefix string }{
		{"NUL prefix", "\x00"},
		{"invalid UTF-8 prefix", "\xff"},
		{"plain", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := string(roundTrip(e, sb, "/home/user/f.txt", []byte(tc.prefix+text))), tc.prefix+red; got != want {
				t.Fatalf("GET /files = %q, want %q", got, want)
			}
		})
	}
	t.Run("3 MiB with secrets at chunk boundaries", func(t *testing.T) {
		file, want := guardtest.LargeText(3<<20, agent.ChunkSize)
		got := string(roundTrip(e, sb, "/home/user/big.txt", []byte(file)))
		if got != want {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%d bytes, want %d; first difference at %d: got %q, want %q", len(got), len(want), i,
				got[max(0, i-20):min(len(got), i+40)], want[max(0, i-20):min(len(want), i+40)])
		}
	})
	t.Run("PNG with a secret in a tEXt chunk", func(t *testing.T) {
		email := guardtest.Email()
		img := guardtest.PNG("Comment", "sent to "+email)
		got := roundTrip(e, sb, "/home/user/plot.png", img)
		if bytes.Contains(got, []byte(email)) || len(got) != len(img) || !strings.HasPrefix(string(got), "\x89PNG") {
			t.Fatalf("PNG: %d bytes (want %d), secret present %v", len(got), len(img), bytes.Contains(got, []byte(email)))
		}
		if _, err := png.Decode(bytes.NewReader(got)); err != nil {
			t.Fatalf("the redacted PNG does not decode: %v", err)
		}
	})
}
