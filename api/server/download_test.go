package server_test

import (
	"bytes"
	"image/png"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/guard/guardtest"
)

// TestDownloadTextWithBinaryBytes: a text file does not become binary by
// holding a NUL or an invalid UTF-8 byte; it is scanned and redacted like
// any text, and the odd bytes are kept where they were.
func TestDownloadTextWithBinaryBytes(t *testing.T) {
	e := newGuardEnv(t)
	text, red := guardtest.SecretText()
	for _, tc := range []struct{ name, prefix string }{
		{"NUL prefix", "\x00"},
		{"invalid UTF-8 prefix", "\xff"},
		{"lone continuation byte", "\x80"},
		{"latin-1", "caf\xe9 "},
		{"NULs after 8000 bytes", strings.Repeat("x", 8000) + "\x00\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.put(t, "user", "/home/user/f.txt", tc.prefix+text)
			w := e.do(t, "GET", "/v1/conversations/c/paths/main/files?path=f.txt", e.keyUser, "", nil)
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if got, want := w.Body.String(), tc.prefix+red; got != want {
				t.Fatalf("download = %q, want %q", clip(got), clip(want))
			}
		})
	}
}

// TestDownloadLargeFileExact: a 3 MiB file with secrets across both chunk
// boundaries and at its end comes back as the original with each secret
// replaced, byte for byte.
func TestDownloadLargeFileExact(t *testing.T) {
	e := newGuardEnv(t)
	file, want := guardtest.LargeText(3<<20, agent.ChunkSize)
	e.put(t, "user", "/home/user/big.txt", file)
	w := e.do(t, "GET", "/v1/conversations/c/paths/main/files?path=big.txt", e.keyUser, "", nil)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	compareLarge(t, w.Body.String(), want)
}

// clip keeps the end of a long text for a failure message.
func clip(s string) string {
	if len(s) > 160 {
		return "…" + s[len(s)-160:]
	}
	return s
}

func compareLarge(t *testing.T, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Fatalf("%d bytes, want %d; first difference at %d: got %q, want %q", len(got), len(want), i,
		got[max(0, i-20):min(len(got), i+40)], want[max(0, i-20):min(len(want), i+40)])
}

// TestDownloadPNGText: a PNG is binary, but the text in it is still
// scanned: the secret in its tEXt chunk is masked in place (same length),
// and the image still decodes (the chunk's CRC is recomputed).
func TestDownloadPNGText(t *testing.T) {
	e := newGuardEnv(t)
	email := guardtest.Email()
	img := guardtest.PNG("Author", "plotted by "+email)
	e.put(t, "user", "/home/user/plot.png", string(img))
	w := e.do(t, "GET", "/v1/conversations/c/paths/main/files?path=plot.png", e.keyUser, "", nil)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	got := w.Body.Bytes()
	if bytes.Contains(got, []byte(email)) || len(got) != len(img) {
		t.Fatalf("PNG download: %d bytes (want %d), secret present: %v", len(got), len(img), bytes.Contains(got, []byte(email)))
	}
	if _, err := png.Decode(bytes.NewReader(got)); err != nil {
		t.Fatalf("the redacted PNG does not decode: %v", err)
	}
}
