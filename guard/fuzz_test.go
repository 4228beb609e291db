package guard

import (
	"context"
	"testing"
	"unicode/utf8"
)

// FuzzGuard checks the invariants on any input: no panic, findings in
// bounds, ordered and disjoint, and a stream split anywhere gives Text's
// output.
func FuzzGuard(f *testing.F) {
	for _, s := range []string{
		"mail alice@exemplar.ie, ip 10.1.2.3, card 4111 1111 1111 1111",
		"ssn: 536221234 ppsn 6433435F +353 87 123 4567 (212) 555-0123",
		"postgres://u:p@h/db token=abcdEF1234567890ghij password=hunter22",
		"-----BEGIN " + "RSA PRIVATE KEY-----\nQUJD\n-----END RSA PRIVATE KEY-----",
		"ａｌｉｃｅ＠ｅｘｅｍｐｌａｒ．ｉｅ ali\u200bce@x.com",
		"2001:db8::1 abc::def 1.3.6.1.4.1 version 1.2.3.4",
		"YWxpY2VAZXhhbXBsZS5jb20= eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
		"<apiToken>\n x \n</apiToken> (\"K\", \"v\") a ::= b",
	} {
		f.Add(s, uint16(len(s)/2))
	}
	g, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, s string, split uint16) {
		fs := g.Scan(s)
		last := 0
		for _, x := range fs {
			if x.Start < last || x.End <= x.Start || x.End > len(s) {
				t.Fatalf("bad finding %+v (last end %d, len %d) in %q", x, last, len(s), s)
			}
			last = x.End
		}
		want := g.Text(ctx, "t", s)
		i := int(split) % (len(s) + 1)
		st := g.Stream(ctx, "t")
		a := st.Write(s[:i])
		b := st.Write(s[i:])
		c := st.Flush()
		if utf8.ValidString(s) && (!utf8.ValidString(a) || !utf8.ValidString(b)) {
			t.Fatalf("stream split UTF-8: %q %q", a, b)
		}
		if got := a + b + c; got != want {
			t.Fatalf("split at %d: stream %q, Text %q", i, got, want)
		}
	})
}

// FuzzFile checks File on any bytes, with or without a binary signature in
// front: no panic, a binary format keeps its length and changes only
// printable bytes, and the output does not depend on where the reads split.
func FuzzFile(f *testing.F) {
	for _, s := range []string{
		"\x00mail alice@exemplar.ie",
		"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde",
		"PK\x03\x04name alice@exemplar.iePK\x01\x02",
		"%PDF-1.4 -----BEGIN " + "RSA PRIVATE KEY-----\nQUJD\n",
	} {
		f.Add([]byte(s), uint16(len(s)/2))
	}
	g, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		whole := redactFile(g, ctx, data, len(data)+1)
		i := 1 + int(split)%(len(data)+1)
		if got := redactFile(g, ctx, data, i); string(got) != string(whole) {
			t.Fatalf("reads of %d: %q, whole: %q", i, got, whole)
		}
		if Format(data[:min(len(data), SniffLen)]) == "" {
			return
		}
		if len(whole) != len(data) {
			t.Fatalf("binary length %d -> %d", len(data), len(whole))
		}
		for k := range data {
			if data[k] != whole[k] && !maskable(data[k], data[k]) {
				t.Fatalf("byte %d (%#x) changed", k, data[k])
			}
		}
	})
}

// FuzzImage checks Image on any bytes: no panic, and what it passes is an
// image no longer than the input.
func FuzzImage(f *testing.F) {
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"), true)
	f.Add([]byte("\xff\xd8\xff\xfe\x00\x05abc\xff\xd9"), false)
	g, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, isPNG bool) {
		format := "jpeg"
		if isPNG {
			format = "png"
		}
		out, marker := g.Image(context.Background(), "t", format, data)
		if (marker == "") == (out == nil && len(data) > 0) || len(out) > len(data) {
			t.Fatalf("Image = %d bytes, %q", len(out), marker)
		}
	})
}
