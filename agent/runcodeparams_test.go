package agent

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var runCodeParamsSamples = []RunCodeParams{
	{Language: Python, Code: "1+1"},
	{Language: Python, Code: "print('héllo ✓ 😀')\n<b>&amp;</b>\t\"q\" \\ \x00\x1f\u2028", TimeoutMs: 30000},
	{Language: JavaScript, Code: "x", Kernel: "k1", TimeoutMs: -1, MaxOutput: 1 << 20, Stream: true, User: RootUser, IPython: true},
	{Language: Bash, Code: "", Stream: true},
	{},
}

// TestDecodeRunCodeParams: the host's encoding takes the fast path and
// gives what was encoded; an environment, or another layout, goes to
// encoding/json with the destination untouched.
func TestDecodeRunCodeParams(t *testing.T) {
	for _, want := range runCodeParamsSamples {
		raw, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got RunCodeParams
		if !DecodeRunCodeParams(raw, &got) {
			t.Fatalf("refused the host's encoding %s", raw)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", raw, d)
		}
	}
	withEnv, _ := json.Marshal(RunCodeParams{Language: Python, Code: "1", Env: map[string]string{"A": "b"}})
	for _, raw := range []string{
		string(withEnv),
		`{"code":"1","language":"python"}`,
		`{"language": "python","code":"1"}`,
		`{"language":"python","code":"1","timeoutMs":1.5}`,
		`{"language":"python","code":"1","timeoutMs":01}`,
		`{"language":"python","code":"\ud800"}`,
		`{"language":"python","code":"1"} `,
		`{"language":"python","code":"1","stream":true,"kernel":"k"}`,
		`{"language":"python","code":"1","Stream":true}`,
		"{\"language\":\"python\",\"code\":\"\xff\"}",
		``,
	} {
		got := RunCodeParams{Code: "untouched"}
		if DecodeRunCodeParams([]byte(raw), &got) {
			t.Errorf("took %q", raw)
		}
		if got.Code != "untouched" {
			t.Errorf("refused %q but wrote the destination", raw)
		}
	}
}

// FuzzRunCodeParams: whatever the fast path accepts, encoding/json
// accepts with the same value.
func FuzzRunCodeParams(f *testing.F) {
	for _, p := range runCodeParamsSamples {
		raw, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"language":"python","code":"\u0041\/\ud83d\ude00","timeoutMs":-0}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast RunCodeParams
		if !DecodeRunCodeParams(raw, &fast) {
			if d := cmp.Diff(RunCodeParams{}, fast); d != "" {
				t.Fatalf("refused but wrote the destination:\n%s", d)
			}
			return
		}
		var ref RunCodeParams
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %q", err, raw)
		}
		if d := cmp.Diff(ref, fast); d != "" {
			t.Fatalf("fast path and encoding/json differ on %q (-json +fast):\n%s", raw, d)
		}
	})
}

// BenchmarkDecodeRunCodeParams: a warm python 1+1's params, by hand and
// by encoding/json.
func BenchmarkDecodeRunCodeParams(b *testing.B) {
	raw, _ := json.Marshal(RunCodeParams{Language: Python, Code: "1+1", TimeoutMs: 30000})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p RunCodeParams
			if !DecodeRunCodeParams(raw, &p) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p RunCodeParams
			if err := json.Unmarshal(raw, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
