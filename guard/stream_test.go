package guard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandlot/sandlot/contexts"
)

// streamText is a text with secrets of every shape, some non-ASCII.
func streamText(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("Grüße! starting job ① on 10.20.30.40\n")
	b.WriteString("export OPENAI_API_KEY=" + fakeOpenAI(r) + "\n")
	b.WriteString(strings.Repeat("progress ████ 50% ", 8) + "\n")
	b.WriteString("card " + group4(fakeCard(r, "4", 16), " ") + " for ａｌｉｃｅ＠ｅｘｅｍｐｌａｒ．ｉｅ\n")
	b.WriteString(pemBlock(r, 20) + "\n")
	b.WriteString("ssn: 536221234, iban " + spaced(fakeIBAN("IE", "AIBK93115212345678")) + "\n")
	b.WriteString("jwt " + fakeJWT(r, `{"sub":"user-42","email":"bob@exemplar.ie"}`) + "\n")
	b.WriteString("done in 1234 ms, token " + fakeGitHubToken(r, "ghp_") + " 日本語テキスト\n")
	return b.String()
}

func collect(st interface {
	Write(string) string
	Flush() string
}, chunks []string, t *testing.T) string {
	var out strings.Builder
	for _, c := range chunks {
		w := st.Write(c)
		if !utf8.ValidString(w) {
			t.Fatalf("Write emitted invalid UTF-8: %q", w)
		}
		out.WriteString(w)
	}
	out.WriteString(st.Flush())
	return out.String()
}

func TestStreamSplitEverywhere(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	g := newTestGuard(t, Config{})
	text := streamText(r)
	want := g.Text(context.Background(), "t", text)
	for _, bad := range []string{"alice", "sk-proj-", "PRIVATE KEY", "536221234", "ghp_", "eyJ"} {
		if strings.Contains(want, bad) {
			t.Fatalf("Text left %q in:\n%s", bad, want)
		}
	}
	for i := 0; i <= len(text); i++ {
		st := g.Stream(context.Background(), "t")
		if got := collect(st, []string{text[:i], text[i:]}, t); got != want {
			t.Fatalf("split at %d:\n got %q\nwant %q", i, got, want)
		}
	}
}

func TestStreamRandomChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	g := newTestGuard(t, Config{})
	var text strings.Builder
	for k := 0; k < 5; k++ {
		text.WriteString(streamText(r))
	}
	want := g.Text(context.Background(), "t", text.String())
	for trial := 0; trial < 30; trial++ {
		var chunks []string
		rest := text.String()
		for rest != "" {
			n := min(len(rest), 1+r.IntN([]int{3, 40, 700}[trial%3]))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		if got := collect(g.Stream(context.Background(), "t"), chunks, t); got != want {
			t.Fatalf("trial %d differs:\n got %q\nwant %q", trial, got, want)
		}
	}
}

func TestStreamHugePEM(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	g := newTestGuard(t, Config{})
	key := pemBlock(r, 2000) // ~130 KB, past the hold bound
	body := strings.Split(key, "\n")[1]
	for _, withEnd := range []bool{true, false} {
		k := key
		if !withEnd {
			k = key[:strings.Index(key, "-----END")]
		}
		text := "before\n" + k + "\n$ echo after\nafter\n"
		var chunks []string
		for rest := text; rest != ""; {
			n := min(len(rest), 1000)
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		got := collect(g.Stream(context.Background(), "t"), chunks, t)
		if strings.Contains(got, body) || strings.Contains(got, "END RSA") {
			t.Fatalf("end=%v: key material leaked: %q", withEnd, got[:min(len(got), 300)])
		}
		if !strings.HasPrefix(got, "before\n[REDACTED:PRIVATE_KEY]") || !strings.HasSuffix(got, "\n$ echo after\nafter\n") {
			t.Fatalf("end=%v: got %q", withEnd, got)
		}
	}
}

func TestStreamReportAndOff(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	key := []byte("audit-key")
	var log auditLog
	g := newTestGuard(t, Config{Mode: ModeReport, HMACKey: key, Audit: log.audit})
	text := streamText(r)
	var chunks []string
	for i := 0; i < len(text); i += 97 {
		chunks = append(chunks, text[i:min(len(text), i+97)])
	}
	st := g.Stream(context.Background(), "t")
	for _, c := range chunks {
		if w := st.Write(c); w != c {
			t.Fatalf("report mode changed a chunk: %q -> %q", c, w)
		}
	}
	if f := st.Flush(); f != "" {
		t.Fatalf("report Flush = %q", f)
	}
	want := g.Scan(text)
	if len(log.events) != len(want) {
		t.Fatalf("%d events, want %d: %v", len(log.events), len(want), log.events)
	}
	for i, ev := range log.events {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(text[ev.Start:ev.End]))
		if ev.Start != want[i].Start || ev.End != want[i].End || ev.HMAC != hex.EncodeToString(m.Sum(nil)) {
			t.Errorf("event %d = %+v, want span %+v", i, ev, want[i])
		}
	}

	off := g.Stream(WithMode(context.Background(), ModeOff), "t")
	if off.Write("a@exemplar.ie") != "a@exemplar.ie" || off.Flush() != "" {
		t.Errorf("off stream changed text")
	}
}

func TestStreamLinesFlow(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	g := newTestGuard(t, Config{})
	st := g.Stream(context.Background(), "t")
	if got := st.Write("step 1 of 3\n"); got != "step 1 of 3\n" {
		t.Errorf("a complete line was held: %q", got)
	}
	if got := st.Write("partial sk-"); got != "" {
		t.Errorf("a partial line was emitted: %q", got)
	}
	key := fakeOpenAI(r)
	if got := st.Write(key + " done\n"); got != "partial [REDACTED:API_KEY] done\n" {
		t.Errorf("split key: %q", got)
	}
	// a key block written line by line is held until its END line
	var out strings.Builder
	for _, line := range strings.SplitAfter(pemBlock(r, 10)+"\nafter\n", "\n") {
		out.WriteString(st.Write(line))
	}
	if got := out.String(); got != "[REDACTED:PRIVATE_KEY]\nafter\n" {
		t.Errorf("line-by-line key: %q", got)
	}
	// progress bars redraw with \r
	if got := st.Write("\r 45%|####  |"); got != "\r" {
		t.Errorf("progress line: %q", got)
	}
	if got := st.Write("\r 46%|####  |\r"); got != " 45%|####  |\r 46%|####  |\r" {
		t.Errorf("progress redraw held: %q", got)
	}
	// an XML value line is redacted before its closing tag arrives
	tok := randKey(r, 32)
	if got := st.Write("<apiToken>\n    " + tok + "\n"); strings.Contains(got, tok) {
		t.Errorf("XML value leaked: %q", got)
	}
	st.Write("</apiToken>\n")
	if f := st.Flush(); strings.Contains(f, tok) {
		t.Errorf("Flush = %q", f)
	}
}

func TestStreamLongRunesNoSpaces(t *testing.T) {
	g := newTestGuard(t, Config{})
	text := strings.Repeat("é日", 30000) // 150 KB, no spaces, no newlines
	var chunks []string
	for rest := text; rest != ""; {
		n := min(len(rest), 999)
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	if got := collect(g.Stream(context.Background(), "t"), chunks, t); got != text {
		t.Fatalf("text changed (len %d vs %d)", len(got), len(text))
	}
}

// TestStreamFlushIdle: a quiet stream releases its partial line (a prompt),
// keeps redacting what follows with the released text as context, and
// never releases what may open a private key block.
func TestStreamFlushIdle(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	g := newTestGuard(t, Config{})
	st := g.Stream(context.Background(), "t").(*stream)
	if got := st.Write("name? "); got != "" {
		t.Fatalf("a partial line was emitted at once: %q", got)
	}
	if got := st.FlushIdle(); got != "name? " {
		t.Fatalf("idle prompt: %q", got)
	}
	if got := st.Write("bob\n"); got != "bob\n" {
		t.Fatalf("after the idle flush: %q", got)
	}
	// a key split by a pause: the part before it left, the rest is caught
	key := fakeOpenAI(r)
	st.Write("key " + key[:12])
	first := st.FlushIdle()
	rest := st.Write(key[12:] + "\n")
	if strings.Contains(first+rest, key[12:]) || !strings.Contains(rest, "[REDACTED") {
		t.Fatalf("split key around a pause: %q then %q", first, rest)
	}
	// a key block in progress is held across pauses and dropped whole
	block := pemBlock(r, 6)
	var out strings.Builder
	for _, line := range strings.SplitAfter(block+"\n", "\n") {
		out.WriteString(st.Write(line))
		out.WriteString(st.FlushIdle())
	}
	out.WriteString(st.Flush())
	if got := out.String(); strings.Contains(got, "PRIVATE KEY") || !strings.Contains(got, "[REDACTED:PRIVATE_KEY]") {
		t.Fatalf("key block with pauses: %q", got)
	}
	pass := g.Stream(context.Background(), "t")
	if _, ok := pass.(contexts.IdleFlusher); !ok {
		t.Fatal("the guard's stream is no IdleFlusher")
	}
}
