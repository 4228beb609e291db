package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/secret"
)

// passGuard lets everything through, so only SecretGuard acts.
type passGuard struct{}

func (passGuard) Text(_ context.Context, _, s string) string                      { return s }
func (passGuard) Stream(context.Context, string) contexts.StreamRedactor          { return &passStream{} }
func (passGuard) File(context.Context, string) contexts.FileRedactor              { return &passFile{} }
func (passGuard) Image(_ context.Context, _, _ string, d []byte) ([]byte, string) { return d, "" }

type passStream struct{}

func (*passStream) Write(s string) string { return s }
func (*passStream) Flush() string         { return "" }

type passFile struct{}

func (*passFile) Write(p []byte) []byte { return p }
func (*passFile) Flush() []byte         { return nil }

// TestSecretGuard: a tenant's values never leave in text, streams (split
// anywhere, across multi-byte runes), files (length kept) or images;
// another tenant's output is untouched; Forget picks up a new value.
func TestSecretGuard(t *testing.T) {
	vals := map[string][]Secret{"t1": {{Secret: secret.Secret{ID: "abc", Value: "s3cr3t-välue-42"}}}}
	g := NewSecretGuard(passGuard{}, func(_ context.Context, tn string) ([]Secret, error) { return vals[tn], nil })
	ctx := context.Background()
	const v = "s3cr3t-välue-42"
	text := "token=" + v + " and é " + v + "!"
	if got := g.Text(ctx, "t1", text); strings.Contains(got, v) || !strings.Contains(got, "sandlot-secret-abc") {
		t.Errorf("text: %q", got)
	}
	if got := g.Text(ctx, "t2", text); got != text {
		t.Errorf("another tenant's text changed: %q", got)
	}
	for size := 1; size <= len(text); size++ {
		st := g.Stream(ctx, "t1")
		var out strings.Builder
		for i := 0; i < len(text); i += size {
			out.WriteString(st.Write(text[i:min(i+size, len(text))]))
		}
		out.WriteString(st.Flush())
		if got := out.String(); strings.Contains(got, v) || got != strings.ReplaceAll(text, v, "sandlot-secret-abc") {
			t.Fatalf("stream in chunks of %d: %q", size, got)
		}
	}
	f := g.File(ctx, "t1")
	var fout []byte
	for i := 0; i < len(text); i += 3 {
		fout = append(fout, f.Write([]byte(text[i:min(i+3, len(text))]))...)
	}
	fout = append(fout, f.Flush()...)
	if strings.Contains(string(fout), v) || len(fout) != len(text) {
		t.Errorf("file: %q (%d bytes, want %d)", fout, len(fout), len(text))
	}
	if d, marker := g.Image(ctx, "t1", "png", []byte("\x89PNG..."+v)); d != nil || marker == "" {
		t.Errorf("image with a value: %q %q", d, marker)
	}
	vals["t1"] = []Secret{{Secret: secret.Secret{ID: "abc", Value: "rotated-value-7"}}}
	g.Forget("t1")
	if got := g.Text(ctx, "t1", "x rotated-value-7"); strings.Contains(got, "rotated-value-7") {
		t.Errorf("after Forget: %q", got)
	}
}
