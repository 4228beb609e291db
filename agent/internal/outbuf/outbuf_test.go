package outbuf

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBuffer(t *testing.T) {
	cases := []struct {
		name      string
		max       int64
		writes    []string
		want      string
		streamed  string
		truncated bool
	}{
		{"fits", 10, []string{"abc", "def"}, "abcdef", "abcdef", false},
		{"exact", 6, []string{"abc", "def"}, "abcdef", "abcdef", false},
		{"cut", 4, []string{"abc", "def"}, "abcd", "abcd", true},
		{"cut keeps runes whole", 4, []string{"ab", "é€"}, "abé", "abé", true},
		{"rune split across writes", 10, []string{"a\xe2\x82", "\xacb"}, "a€b", "a€b", false},
		{"default max", 0, []string{strings.Repeat("x", DefaultMax+5)}, strings.Repeat("x", DefaultMax), strings.Repeat("x", DefaultMax), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.max)
			var streamed strings.Builder
			for _, w := range tc.writes {
				s := b.Write([]byte(w))
				if !utf8.ValidString(s) {
					t.Fatalf("streamed invalid UTF-8 %q", s)
				}
				streamed.WriteString(s)
			}
			streamed.WriteString(b.Flush())
			if b.String() != tc.want || streamed.String() != tc.streamed || b.Truncated() != tc.truncated {
				t.Fatalf("got %q streamed %q truncated %v", b.String(), streamed.String(), b.Truncated())
			}
		})
	}
}
