package server

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
)

// decodeRunCode decodes b, which must be valid JSON.
func decodeRunCode(t *testing.T, b []byte) agent.RunCodeResult {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %q", b)
	}
	var r agent.RunCodeResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAppendRunCode: the hand-written encoding decodes to what
// encoding/json's decodes to, for every field, escapes and invalid UTF-8
// included; results with raw JSON go through encoding/json.
func TestAppendRunCode(t *testing.T) {
	tricky := "a\"b\\c\n\r\t\x00\x01\x1f\x7f<>&\u2028\u2029é漢\U0001F600\xff\xc3(end"
	for _, tc := range []struct {
		name  string
		r     agent.RunCodeResult
		plain bool
	}{
		{"1+1", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Main: true, Text: "2"}}, ExecutionCount: 3, DurationMs: 1}, true},
		{"empty", agent.RunCodeResult{}, true},
		{"every field", agent.RunCodeResult{Success: false, Stdout: tricky, Stderr: tricky + "x",
			Results:  []agent.RichResult{{Main: true, Text: tricky, HTML: "<b>", Markdown: "*m*", SVG: "<svg/>", PNG: "iVBO", JPEG: "/9j/", LaTeX: `\frac{1}{2}`, JavaScript: "x()"}, {}},
			Error:    &agent.ExecError{Name: "ValueError", Value: tricky, Traceback: "tb\n" + tricky},
			ExitCode: -1, TimedOut: true, Truncated: true, ExecutionCount: 1 << 40, DurationMs: -5, KernelRestarted: true}, true},
		{"chart", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{PNG: "x", Chart: json.RawMessage(`{"type":"line"}`)}}}, false},
		{"table", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Data: json.RawMessage(`{"a":[1]}`)}}}, false},
		{"json", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{JSON: json.RawMessage(`[1, 2]`)}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plainRunCode(&tc.r); got != tc.plain {
				t.Fatalf("plainRunCode = %v, want %v", got, tc.plain)
			}
			want, err := json.Marshal(&tc.r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendResult([]byte("prefix"), &tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got[:6]) != "prefix" {
				t.Fatalf("the prefix was lost: %q", got)
			}
			if diff := cmp.Diff(decodeRunCode(t, want), decodeRunCode(t, got[6:])); diff != "" {
				t.Fatalf("decoded differently from encoding/json's (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppendStringRandom: random bytes, valid UTF-8 or not, decode as
// encoding/json's encoding of the same string decodes.
func TestAppendStringRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		s := string(b)
		want, _ := json.Marshal(s)
		got := appendString(nil, s)
		var ws, gs string
		if err := json.Unmarshal(want, &ws); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &gs); err != nil {
			t.Fatalf("appendString(%q) = %q: %v", s, got, err)
		}
		if ws != gs {
			t.Fatalf("appendString(%q) decodes to %q, encoding/json's to %q", s, gs, ws)
		}
	}
}

func BenchmarkAppendRunCode(b *testing.B) {
	r := &agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Main: true, Text: "2"}}, ExecutionCount: 3, DurationMs: 1}
	b.Run("hand", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = appendResult(buf[:0], r)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}

// fillNonZero sets every exported field reachable from v (a settable
// struct, pointer, slice, map or scalar) to a non-zero value, so a field
// added to the result types later reaches the encoders without anyone
// remembering to add it to a test. json.RawMessage fields are left out:
// plainRunCode sends a result holding one through encoding/json
// (TestPlainRunCodeRawFields checks that it sees each of them).
func fillNonZero(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString(path + " \"q\" \\ \n\x01\xffé")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-int64(len(path)))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(len(path)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(len(path)) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillNonZero(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fillNonZero(t, v.Index(0), path+"[0]")
		fillNonZero(t, v.Index(1), path+"[1]")
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillNonZero(t, k, path+".key")
		fillNonZero(t, e, path+".value")
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fillNonZero(t, v.Field(i), path+"."+f.Name)
			if v.Field(i).IsZero() && f.Type != reflect.TypeFor[json.RawMessage]() {
				t.Fatalf("%s.%s was left zero", path, f.Name)
			}
		}
	default:
		t.Fatalf("%s: fillNonZero does not know %s; teach it, and encode.go the field", path, v.Type())
	}
}

// TestAppendRunCodeEveryField: every exported field of RunCodeResult,
// RichResult and ExecError, set by reflection, comes out of the
// hand-written encoder as encoding/json writes it. A field added to one
// of these types and not to appendRunCode/appendRich (encode.go) fails
// here.
func TestAppendRunCodeEveryField(t *testing.T) {
	var r agent.RunCodeResult
	fillNonZero(t, reflect.ValueOf(&r).Elem(), "RunCodeResult")
	if !plainRunCode(&r) {
		t.Fatal("plainRunCode is false for a result with no raw JSON")
	}
	want, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	got := appendRunCode(nil, &r)
	// Decoded as generic JSON: a field dropped, renamed or mistyped by the
	// hand-written encoder shows up as a key missing or different.
	var wv, gv any
	if err := json.Unmarshal(want, &wv); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &gv); err != nil {
		t.Fatalf("appendRunCode wrote invalid JSON %q: %v", got, err)
	}
	if diff := cmp.Diff(wv, gv); diff != "" {
		t.Fatalf("appendRunCode (encode.go) differs from encoding/json; a field was added to the types and not to the encoder? (-want +got):\n%s", diff)
	}
}

// TestPlainRunCodeRawFields: a result holding any json.RawMessage field
// of RichResult goes through encoding/json, since appendRich does not
// write raw JSON.
func TestPlainRunCodeRawFields(t *testing.T) {
	rt := reflect.TypeFor[agent.RichResult]()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if f.Type != reflect.TypeFor[json.RawMessage]() {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			var x agent.RichResult
			reflect.ValueOf(&x).Elem().Field(i).Set(reflect.ValueOf(json.RawMessage(`{"a":1}`)))
			r := agent.RunCodeResult{Results: []agent.RichResult{{Text: "t"}, x}}
			if plainRunCode(&r) {
				t.Fatalf("plainRunCode is true with %s set: appendRich would drop it (encode.go)", f.Name)
			}
		})
	}
}

// TestAppendPingReply: a ping's answer by hand is byte for byte the one
// reply writes through encoding/json.
func TestAppendPingReply(t *testing.T) {
	for _, tc := range []struct {
		id     uint64
		uptime int64
		pid    int
	}{{1, 0, 1}, {18446744073709551615, 1 << 62, 1 << 31}, {42, -3, 0}} {
		res, err := json.Marshal(agent.PingResult{Version: agent.Version, UptimeMs: tc.uptime, PID: tc.pid})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"jsonrpc":"2.0","id":` + strconv.FormatUint(tc.id, 10) + `,"result":` + string(res) + "}\n"
		if got := string(appendPingReply(nil, tc.id, tc.uptime, tc.pid)); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
