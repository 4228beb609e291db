package guard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard/guardtest"
)

// declaredSecret is a value with no shape any detector knows: only its
// declaration makes it a secret.
const declaredSecret = "plum tree 42 orchard"

// multiline is a declared value across a line end, which the generic
// stream cut (after the last newline) would split.
const multiline = "first-half-AAA\nsecond-half-BBB"

func declaredCtx() context.Context {
	return contexts.WithMasked(context.Background(), []string{declaredSecret, "s3cr3t-Value-77", multiline})
}

// leaks reports the forms of the declared values found in s.
func leaks(s string) []string {
	var out []string
	for _, v := range []string{declaredSecret, "s3cr3t-Value-77", multiline} {
		forms := map[string]string{
			"plain": v, "hex": hex.EncodeToString([]byte(v)), "url": url.QueryEscape(v),
		}
		for k := range 3 {
			forms["b64@"+string(rune('0'+k))] = aligned(base64.RawStdEncoding, v, k)
		}
		for name, f := range forms {
			if strings.Contains(s, f) {
				out = append(out, v+" as "+name)
			}
		}
	}
	return out
}

func TestDeclaredText(t *testing.T) {
	g := newTestGuard(t, Config{})
	b64 := func(prefix string) string {
		return base64.StdEncoding.EncodeToString([]byte(prefix + declaredSecret + " and more"))
	}
	for _, tc := range []struct{ name, in string }{
		{"plain", "the value is " + declaredSecret + "."},
		{"glued", "x" + declaredSecret + "y"},
		{"base64 at 0", "data: " + b64("")},
		{"base64 at 1", "data: " + b64("a")},
		{"base64 at 2", "data: " + b64("ab")},
		{"short base64", base64.StdEncoding.EncodeToString([]byte("s3cr3t-Value-77"))},
		{"url base64", base64.URLEncoding.EncodeToString([]byte("??" + declaredSecret))},
		{"hex", hex.EncodeToString([]byte(declaredSecret))},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte(declaredSecret)))},
		{"query", "GET /?q=" + url.QueryEscape(declaredSecret)},
		{"json", `{"v":"s3cr3t-Value-77"}`},
		{"twice", declaredSecret + declaredSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := g.Text(declaredCtx(), "t", tc.in)
			if l := leaks(got); len(l) > 0 || !strings.Contains(got, Marker(TypeSecret)) {
				t.Fatalf("Text(%q) = %q: leaks %v", tc.in, got, l)
			}
			if plain := g.Text(context.Background(), "t", tc.in); plain != tc.in {
				t.Fatalf("without declared values Text changed %q to %q", tc.in, plain)
			}
		})
	}
}

func TestDeclaredTextKeepsTheRest(t *testing.T) {
	g := newTestGuard(t, Config{})
	in := "before " + declaredSecret + " after"
	if got, want := g.Text(declaredCtx(), "t", in), "before "+Marker(TypeSecret)+" after"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestDeclaredStreamSplit writes output holding a declared value split at
// every byte, with an idle flush (a pause) between the halves, and as one
// byte per write: the value never leaves whole or in part.
func TestDeclaredStreamSplit(t *testing.T) {
	g := newTestGuard(t, Config{})
	text := "line one\nkey: " + declaredSecret + " end\n" + multiline + "\nb64 " +
		base64.StdEncoding.EncodeToString([]byte("x"+declaredSecret)) + "\n"
	want := g.Text(declaredCtx(), "t", text)
	if l := leaks(want); len(l) > 0 {
		t.Fatalf("Text leaks %v: %q", l, want)
	}
	for i := 0; i <= len(text); i++ {
		for _, pause := range []bool{false, true} {
			st := g.Stream(declaredCtx(), "t")
			out := st.Write(text[:i])
			if pause {
				out += st.(contexts.IdleFlusher).FlushIdle()
			}
			out += st.Write(text[i:]) + st.Flush()
			if l := leaks(out); len(l) > 0 {
				t.Fatalf("split at %d (pause %v): leaks %v in %q", i, pause, l, out)
			}
			if !pause && out != want {
				t.Fatalf("split at %d:\n got %q\nwant %q", i, out, want)
			}
		}
	}
	st := g.Stream(declaredCtx(), "t")
	var out strings.Builder
	for i := range len(text) {
		out.WriteString(st.Write(text[i : i+1]))
		out.WriteString(st.(contexts.IdleFlusher).FlushIdle())
	}
	out.WriteString(st.Flush())
	if l := leaks(out.String()); len(l) > 0 {
		t.Fatalf("byte by byte with pauses: leaks %v in %q", l, out.String())
	}
}

// TestDeclaredFile reads a file whose declared value straddles the chunk
// boundary, as text and inside a binary format.
func TestDeclaredFile(t *testing.T) {
	g := newTestGuard(t, Config{})
	for _, head := range []string{"text file\n", "\x89PNG\r\n\x1a\n"} {
		data := []byte(head + strings.Repeat("filler ", 60) + declaredSecret + " tail\n")
		cut := bytes.Index(data, []byte(declaredSecret)) + 7
		for _, split := range []int{cut, SniffLen, len(data) - 3} {
			f := g.File(declaredCtx(), "t")
			out := append(f.Write(data[:split]), f.Write(data[split:])...)
			out = append(out, f.Flush()...)
			if l := leaks(string(out)); len(l) > 0 {
				t.Fatalf("%q split at %d: leaks %v", head, split, l)
			}
		}
	}
}

// TestKnownValues: a tenant's stored values (Config.Known) are masked as
// declared ones are, with their encodings, in text, streams split at
// every byte, files and images (one in pixel data is withheld); another
// tenant's output is untouched; lookups are cached until Forget; a
// failed lookup keeps the last values; off mode passes them.
func TestKnownValues(t *testing.T) {
	var mu sync.Mutex
	stored := map[string][]string{"t1": {"s3cr3t-Value-77", "tiny"}}
	lookups := 0
	fail := false
	g := newTestGuard(t, Config{Known: func(_ context.Context, tenantID string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups++
		if fail {
			return nil, errors.New("the store is down")
		}
		return stored[tenantID], nil
	}})
	ctx := context.Background()
	v := "s3cr3t-Value-77"
	forms := []string{v, hex.EncodeToString([]byte(v)), url.QueryEscape(v), aligned(base64.RawStdEncoding, v, 1),
		aligned(base64.RawURLEncoding, v, 2), strings.ToUpper(hex.EncodeToString([]byte(v)))}
	text := "a " + v + " b " + hex.EncodeToString([]byte(v)) + " c " + base64.StdEncoding.EncodeToString([]byte("x"+v)) +
		" d " + url.QueryEscape(v) + " e tiny f\n"
	check := func(where, out string) {
		t.Helper()
		for _, f := range append(forms, "tiny") {
			if strings.Contains(out, f) {
				t.Fatalf("%s: %q leaks %q", where, out, f)
			}
		}
	}
	want := g.Text(ctx, "t1", text)
	check("Text", want)
	if !strings.Contains(want, Marker(TypeSecret)) {
		t.Fatalf("Text without markers: %q", want)
	}
	if other := g.Text(ctx, "t2", text); other != text {
		t.Fatalf("another tenant's text changed: %q", other)
	}
	for i := 0; i <= len(text); i++ {
		st := g.Stream(ctx, "t1")
		out := st.Write(text[:i]) + st.Write(text[i:]) + st.Flush()
		if out != want {
			t.Fatalf("stream split at %d:\n got %q\nwant %q", i, out, want)
		}
	}
	f := g.File(ctx, "t1")
	var fout []byte
	for i := 0; i < len(text); i += 7 {
		fout = append(fout, f.Write([]byte(text[i:min(i+7, len(text))]))...)
	}
	check("File", string(append(fout, f.Flush()...)))
	img := withChunk(guardtest.PNG("Software", "matplotlib"), "IDAT", []byte("\x00\x01"+hex.EncodeToString([]byte(v))))
	if d, marker := g.Image(ctx, "t1", "png", img); d != nil || marker != Marker(TypeSecret) {
		t.Fatalf("an image holding a stored value: %d bytes, marker %q", len(d), marker)
	}
	if off := g.Text(WithMode(ctx, ModeOff), "t1", text); off != text {
		t.Fatalf("off mode changed the text: %q", off)
	}

	mu.Lock()
	n := lookups
	stored["t1"] = []string{"rotated-Value-88"}
	mu.Unlock()
	if got := g.Text(ctx, "t1", "x rotated-Value-88"); got != "x rotated-Value-88" || lookups != n {
		t.Fatalf("within the cache: %q after %d lookups (was %d)", got, lookups, n)
	}
	g.Forget("t1")
	if got := g.Text(ctx, "t1", "x rotated-Value-88"); strings.Contains(got, "rotated-Value-88") {
		t.Fatalf("after Forget: %q", got)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	g.Forget("t1")
	if got := g.Text(ctx, "t1", "x rotated-Value-88"); strings.Contains(got, "rotated-Value-88") {
		t.Fatalf("with the store down, the last values: %q", got)
	}
}
