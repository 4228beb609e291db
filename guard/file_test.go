package guard

import (
	"archive/zip"
	"bytes"
	"context"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard/guardtest"
)

// redactFile runs data through a File redactor in chunks of the given
// sizes (cycled), as ReadFile does.
func redactFile(g *Guard, ctx context.Context, data []byte, sizes ...int) []byte {
	fr := g.File(ctx, "t")
	var out []byte
	for i, k := 0, 0; i < len(data); k++ {
		n := min(len(data)-i, sizes[k%len(sizes)])
		out = append(out, fr.Write(data[i:i+n])...)
		i += n
	}
	return append(out, fr.Flush()...)
}

// TestFileText: anything without a known signature is text, redacted as
// Text redacts it, whatever bytes it holds and however it is chunked.
func TestFileText(t *testing.T) {
	g := newTestGuard(t, Config{})
	r := rand.New(rand.NewPCG(21, 21))
	text, _ := guardtest.SecretText()
	junk := make([]byte, 3000)
	for i := range junk {
		junk[i] = byte(r.UintN(256))
	}
	for _, tc := range []struct{ name, data string }{
		{"NUL prefix", "\x00" + text},
		{"invalid UTF-8 prefix", "\xff\xfe\xfd" + text},
		{"latin-1", "caf\xe9 " + text + "na\xefve\n"},
		{"NULs between lines", strings.ReplaceAll(text, "\n", "\x00\n")},
		{"split multi-byte characters", "é" + text + "日本\xe6\x97"},
		{"random bytes around", string(junk[:1500]) + "\n" + text + string(junk[1500:])},
		{"short", "\x00a@b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := g.Text(context.Background(), "t", tc.data)
			if tc.name != "short" && strings.Contains(want, "ghp_") {
				t.Fatalf("Text missed the token: %q", want)
			}
			for _, sizes := range [][]int{{len(tc.data) + 1}, {1}, {7, 300}, {SniffLen - 1, 2}} {
				if got := string(redactFile(g, context.Background(), []byte(tc.data), sizes...)); got != want {
					t.Fatalf("chunks %v:\n got %q\nwant %q", sizes, got, want)
				}
			}
		})
	}
}

// TestFilePNG: a PNG keeps its length; the secret in its tEXt chunk is
// masked; the chunk's CRC is recomputed so the image decodes; every other
// byte is unchanged; and the result does not depend on the chunking.
func TestFilePNG(t *testing.T) {
	g := newTestGuard(t, Config{})
	email, tok := guardtest.Email(), guardtest.GitHubToken()
	img := guardtest.PNG("Comment", "by "+email+" with "+tok)
	want := redactFile(g, context.Background(), img, len(img))
	if len(want) != len(img) || bytes.Contains(want, []byte(email)) || bytes.Contains(want, []byte(tok)) {
		t.Fatalf("redacted PNG: %d bytes (want %d): %q", len(want), len(img), want)
	}
	if !bytes.Contains(want, []byte("[REDACTED:EMAIL]")) {
		t.Errorf("no marker in %q", want)
	}
	if _, err := png.Decode(bytes.NewReader(want)); err != nil {
		t.Fatalf("redacted PNG does not decode: %v", err)
	}
	changed := 0
	for i := range img {
		if img[i] != want[i] {
			changed++
		}
	}
	if changed > len(email)+len(tok)+4 {
		t.Errorf("%d bytes changed, want at most the two values and the CRC", changed)
	}
	for _, sizes := range [][]int{{1}, {3, 50}, {SniffLen}} {
		if got := redactFile(g, context.Background(), img, sizes...); !bytes.Equal(got, want) {
			t.Fatalf("chunks %v: got %q", sizes, got)
		}
	}
}

// TestFileBinaryKeepsStructure: in a ZIP (stored, so the content is
// readable), the values in names and content are masked in place; only
// printable bytes of a finding change.
func TestFileBinaryKeepsStructure(t *testing.T) {
	g := newTestGuard(t, Config{})
	email := guardtest.Email()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "to " + email + ".txt", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("contact " + email + "\n"))
	zw.Close()
	in := b.Bytes()
	got := redactFile(g, context.Background(), in, 100)
	if len(got) != len(in) || bytes.Contains(got, []byte(email)) {
		t.Fatalf("zip: %d bytes (want %d), secret left: %v", len(got), len(in), bytes.Contains(got, []byte(email)))
	}
	for i := range in {
		if in[i] != got[i] && !(maskable(in[i], in[i]) && maskable(got[i], got[i])) {
			t.Fatalf("byte %d changed from %#x to %#x: only printable bytes may change", i, in[i], got[i])
		}
	}
	if _, err := zip.NewReader(bytes.NewReader(got), int64(len(got))); err != nil {
		t.Fatalf("the directory no longer reads: %v", err)
	}
}

// TestFileBinaryHugePEM: a private key block longer than the hold bound
// inside a binary format is masked to its last body line, and every byte
// outside it is unchanged (the stream's offsets stay exact while it drops
// the block's lines).
func TestFileBinaryHugePEM(t *testing.T) {
	g := newTestGuard(t, Config{})
	r := rand.New(rand.NewPCG(22, 22))
	key := pemBlock(r, 2000)
	head := append([]byte("PK\x03\x04\x00\x00"), "name\x00\x01\x02\n"...)
	tail := []byte("\x00\x01after the key, some text\n\x00")
	in := append(append(append([]byte(nil), head...), key...), tail...)
	for _, sizes := range [][]int{{1000}, {4096, 333}, {len(in)}} {
		got := redactFile(g, context.Background(), in, sizes...)
		if len(got) != len(in) {
			t.Fatalf("chunks %v: %d bytes, want %d", sizes, len(got), len(in))
		}
		body := got[len(head) : len(head)+len(key)]
		if strings.Trim(string(body), "*\n[]REDACTED:PRIVATE_KEY") != "" {
			t.Fatalf("chunks %v: key material left: %q", sizes, body[:200])
		}
		if !bytes.Equal(got[:len(head)], head) || !bytes.Equal(got[len(head)+len(key):], tail) {
			t.Fatalf("chunks %v: bytes outside the key changed: %q ... %q", sizes, got[:len(head)], got[len(head)+len(key):])
		}
	}
}

func TestFileReportAndOff(t *testing.T) {
	var log auditLog
	g := newTestGuard(t, Config{Mode: ModeReport, Audit: log.audit})
	email := guardtest.Email()
	img := guardtest.PNG("Comment", "by "+email)
	text := "\x00mail " + email + "\n"
	for _, data := range [][]byte{img, []byte(text)} {
		log.events = nil
		if got := redactFile(g, context.Background(), data, 10); !bytes.Equal(got, data) {
			t.Fatalf("report mode changed the file: %q", got)
		}
		if len(log.events) != 1 || string(data[log.events[0].Start:log.events[0].End]) != email {
			t.Fatalf("report events %+v, want the email's offsets", log.events)
		}
	}
	off := WithMode(context.Background(), ModeOff)
	if got := redactFile(g, off, []byte(text), 3); string(got) != text {
		t.Fatalf("off mode changed the file: %q", got)
	}
}

// TestFileBinaryGlued: in binary data a value often runs straight into
// printable bytes of the structure (SQLite stores a row's columns back to
// back); emails and checksummed tokens still match there. Text keeps the
// strict rules.
func TestFileBinaryGlued(t *testing.T) {
	g := newTestGuard(t, Config{})
	email, tok := guardtest.Email(), guardtest.GitHubToken()
	row := "\x04\x17\x1b\x1bSmith" + email + "Dublin" + tok + "Xy7\x00"
	in := append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0}, 300)...)
	in = append(in, row...)
	got := redactFile(g, context.Background(), in, 64)
	if len(got) != len(in) || bytes.Contains(got, []byte(email)) || bytes.Contains(got, []byte(tok)) {
		t.Fatalf("glued values left: %q", got[316:])
	}
	// The local part cannot be told from what precedes it; what follows
	// the values stays.
	if !bytes.Contains(got, []byte("Dublin")) || !bytes.Contains(got, []byte("Xy7")) {
		t.Errorf("the neighbours were masked too: %q", got[316:])
	}
	if fs := g.Scan("mail " + email + "Dublin"); len(fs) != 0 {
		t.Errorf("text matched a glued email: %+v", fs)
	}
}

// TestMessage: a message whose protocol says what it is is not sniffed:
// binary keeps its length (the address masked in place) even when it
// starts like text, and text is redacted as Text, even when it starts
// with a binary signature.
func TestMessage(t *testing.T) {
	g := newTestGuard(t, Config{})
	ctx := context.Background()
	email := guardtest.Email()
	bin := []byte("plain words then " + email + "\x00\x01")
	m := g.Message(ctx, "t", true)
	out := append(m.Write(bin[:20]), m.Write(bin[20:])...)
	out = append(out, m.Flush()...)
	if len(out) != len(bin) || bytes.Contains(out, []byte(email)) {
		t.Errorf("binary message: %q", out)
	}
	text := "PK\x03\x04 then " + email
	m = g.Message(ctx, "t", false)
	if got := string(append(m.Write([]byte(text)), m.Flush()...)); got != g.Text(ctx, "t", text) {
		t.Errorf("text message: %q, want %q", got, g.Text(ctx, "t", text))
	}
	if off := g.Message(WithMode(ctx, ModeOff), "t", false); string(off.Write([]byte(text))) != text {
		t.Error("off mode changed a message")
	}
}

// TestFileFlushIdle: a file read from a source that went quiet (a
// response body) releases its held tail redacted, keeps the start of a
// known value held, and reads on as the same file.
func TestFileFlushIdle(t *testing.T) {
	g := newTestGuard(t, Config{})
	email := guardtest.Email()
	ctx := contexts.WithMasked(context.Background(), []string{"s3cr3t-Value-77"})
	f := g.File(ctx, "t").(*file)
	out := f.Write([]byte("name? "))
	out = append(out, f.FlushIdle()...)
	if string(out) != "name? " {
		t.Fatalf("a quiet prompt: %q", out)
	}
	out = f.Write([]byte("mail " + email + " key s3cr3t-Va"))
	out = append(out, f.FlushIdle()...)
	if strings.Contains(string(out), email) || strings.Contains(string(out), "s3cr3t-Va") || !strings.Contains(string(out), "mail ") {
		t.Fatalf("after a second quiet spell: %q", out)
	}
	out = append(out, f.Write([]byte("lue-77 end\n"))...)
	out = append(out, f.Flush()...)
	if got := string(out); strings.Contains(got, "s3cr3t") || !strings.HasSuffix(got, Marker(TypeSecret)+" end\n") {
		t.Fatalf("the known value across the quiet spell: %q", got)
	}
}
