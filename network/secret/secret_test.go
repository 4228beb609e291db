package secret

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sandlot/sandlot/errdefs"
)

func TestReplacer(t *testing.T) {
	r := NewReplacer("ab", "X", "abc", "Y", "c", "Z")
	tests := []struct{ in, want string }{
		{"", ""},
		{"nothing", "nothing"},
		{"ab", "X"},
		{"abc", "Y"}, // longest at a tie
		{"xabcab c", "xYX Z"},
		{"aab", "aX"},
	}
	for _, tt := range tests {
		got, _ := r.String(tt.in)
		if got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":    func(r io.Reader) io.Reader { return r },
			"one byte": iotest.OneByteReader,
			"half":     iotest.HalfReader,
		} {
			b, err := io.ReadAll(r.Reader(wrap(strings.NewReader(tt.in))))
			if err != nil || string(b) != tt.want {
				t.Errorf("Reader(%s, %q) = %q, %v; want %q", name, tt.in, b, err, tt.want)
			}
		}
	}
}

func TestReplacerStreamsLargeInput(t *testing.T) {
	// Matches straddle every read boundary of a large body.
	secret := "s3cr3t-" + strings.Repeat("v", 40)
	var in, want bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&in, "%d %s ", i, secret)
		fmt.Fprintf(&want, "%d PLACEHOLDER ", i)
	}
	r := NewReplacer(secret, "PLACEHOLDER")
	got, err := io.ReadAll(r.Reader(iotest.HalfReader(bytes.NewReader(in.Bytes()))))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("stream replacement differs (len %d, want %d)", len(got), want.Len())
	}
	if bytes.Contains(got, []byte(secret)) {
		t.Fatal("value left in the stream")
	}
}

func TestSecretNeverPrintsItsValue(t *testing.T) {
	s, err := New([]string{"api.example.test"}, "hunter2-value")
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "secret", s)
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), fmt.Sprintf("%v", []Secret{s}),
		fmt.Sprintf("%+v", struct{ S Secret }{s}), logged.String(),
	} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("value printed: %s", out)
		}
	}
	if !strings.HasPrefix(s.Placeholder(), Prefix) || len(s.ID) != 24 {
		t.Errorf("placeholder %q", s.Placeholder())
	}
}

func TestValidate(t *testing.T) {
	ok := Secret{ID: "k1", Hosts: []string{"*.example.test"}, Value: "value-1"}
	tests := map[string]func(*Secret){
		"no id":             func(s *Secret) { s.ID = "" },
		"bad id":            func(s *Secret) { s.ID = "A/B" },
		"no hosts":          func(s *Secret) { s.Hosts = nil },
		"bad host":          func(s *Secret) { s.Hosts = []string{"exa mple"} },
		"host not normal":   func(s *Secret) { s.Hosts = []string{"API.example.test"} },
		"bare wildcard":     func(s *Secret) { s.Hosts = []string{"*"} },
		"short value":       func(s *Secret) { s.Value = "abc" },
		"long value":        func(s *Secret) { s.Value = strings.Repeat("v", MaxValue+1) },
		"newline":           func(s *Secret) { s.Value = "ab\r\ncd" },
		"holds placeholder": func(s *Secret) { s.Value = "x" + Prefix + "y" },
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range tests {
		s := ok
		mut(&s)
		if err := s.Validate(); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	if _, err := NewSet([]Secret{ok, ok}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("duplicate ids: %v", err)
	}
}

func TestSetScopes(t *testing.T) {
	a := Secret{ID: "a", Hosts: []string{"api.example.test"}, Value: "value-a"}
	b := Secret{ID: "b", Hosts: []string{"*.other.test"}, Value: "value-b"}
	set, err := NewSet([]Secret{a, b})
	if err != nil {
		t.Fatal(err)
	}
	req := "Authorization: Bearer " + a.Placeholder() + "\nX-Other: " + b.Placeholder()
	got, n := set.For("api.example.test").String(req)
	if n != 1 || got != "Authorization: Bearer value-a\nX-Other: "+b.Placeholder() {
		t.Errorf("For(api.example.test) = %q (%d)", got, n)
	}
	if set.For("example.test") != nil || set.For("other.test") != nil {
		t.Error("a secret leaks to a host outside its scope")
	}
	if got, _ := set.For("x.other.test").String(req); !strings.Contains(got, "X-Other: value-b") || strings.Contains(got, "value-a") {
		t.Errorf("For(x.other.test) = %q", got)
	}
	scrubbed, _ := set.Scrubber().String("echo: value-a and value-b")
	if scrubbed != "echo: "+a.Placeholder()+" and "+b.Placeholder() {
		t.Errorf("Scrubber = %q", scrubbed)
	}
	var nilSet *Set
	if nilSet.For("x") != nil || !nilSet.Scrubber().Empty() || nilSet.Len() != 0 {
		t.Error("a nil set is not empty")
	}
}
