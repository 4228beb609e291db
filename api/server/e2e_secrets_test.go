package server_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// e2eSecret has no shape any detector knows: only its declaration makes it
// a secret.
const e2eSecret = "plum-orchard-7741-velvet"

// secretLeaks returns the forms of e2eSecret found in s: plain, hex, and
// base64 at each alignment inside a longer run.
func secretLeaks(s string) []string {
	var out []string
	forms := map[string]string{"plain": e2eSecret, "hex": hex.EncodeToString([]byte(e2eSecret))}
	for k, pre := range []string{"", "x", "xy"} {
		b := base64.StdEncoding.EncodeToString([]byte(pre + e2eSecret))
		forms["base64@"+string(rune('0'+k))] = b[(8*k+5)/6 : 8*(k+len(e2eSecret))/6]
	}
	for name, f := range forms {
		if strings.Contains(s, f) {
			out = append(out, name)
		}
	}
	return out
}

// TestE2EDeclaredSecrets attacks declared secrets on a real `sandlot
// serve`: code that gets the value in its environment prints it plain,
// split across two writes with a pause between, base64'd and hex'd, on
// stdout, stderr, as a result and in an error, streams it, writes it to a
// file that the read_file tool and the HTTP download then read, and later
// calls that declare nothing print what the kernel kept. The value never
// leaves; the env variables reach the code; bad names and sizes are 400.
func TestE2EDeclaredSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	runtimePreconditions(t)
	dir, err := os.MkdirTemp("", "sl-e2es-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d := startDaemon(t, dir)
	defer d.cleanup(t, d.key)
	secrets := map[string]string{"API_TOKEN": e2eSecret}
	call := func(t *testing.T, name string, args map[string]any, secrets map[string]string, header ...string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"conversationId": "secrets", "args": args, "secrets": secrets})
		return raw(t, "POST", d.URL+"/v1/tools/"+name, d.key, string(body), header...)
	}
	ok := func(t *testing.T, name string, args map[string]any, secrets map[string]string, header ...string) string {
		t.Helper()
		code, out := call(t, name, args, secrets, header...)
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, out)
		}
		if l := secretLeaks(out); len(l) > 0 {
			t.Fatalf("%s leaked the secret (%v): %s", name, l, out)
		}
		return out
	}
	py := `import os, sys, time, base64
s = os.environ["API_TOKEN"]
print("plain", s)
sys.stdout.write("split " + s[:9]); sys.stdout.flush(); time.sleep(0.5)
sys.stdout.write(s[9:] + "\n"); sys.stdout.flush()
print("b64", base64.b64encode(("x" + s).encode()).decode())
print("hex", s.encode().hex())
print("err", s, file=sys.stderr)
print("greeting", os.environ["GREETING"])
open("/home/user/s.txt", "w").write("in a file " + s + "\n")
kept = s
s`
	args := map[string]any{"language": "python", "code": py, "env": map[string]string{"GREETING": "hello-env"}}
	t.Run("run_code", func(t *testing.T) {
		out := ok(t, "run_code", args, secrets)
		if !strings.Contains(out, "greeting hello-env") || !strings.Contains(out, "[REDACTED:SECRET]") {
			t.Fatalf("want the env and the markers: %s", out)
		}
	})
	t.Run("run_code streamed", func(t *testing.T) {
		out := ok(t, "run_code", args, secrets, "Accept", "application/x-ndjson")
		if !strings.Contains(out, `"type":"final"`) {
			t.Fatalf("no final event: %s", out)
		}
		// The events' data, joined, is what a client prints.
		var joined strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var ev struct{ Data string }
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			joined.WriteString(ev.Data)
		}
		if l := secretLeaks(joined.String()); len(l) > 0 {
			t.Fatalf("stream leaked (%v): %s", l, joined.String())
		}
	})
	t.Run("later calls declare nothing", func(t *testing.T) {
		ok(t, "run_code", map[string]any{"language": "python", "code": "print(kept); kept"}, nil)
		out := ok(t, "run_code", map[string]any{"language": "python", "code": "raise ValueError(kept)"}, nil)
		if !strings.Contains(out, "ValueError") {
			t.Fatalf("want the error: %s", out)
		}
		out = ok(t, "read_file", map[string]any{"path": "s.txt"}, nil)
		if !strings.Contains(out, "in a file [REDACTED:SECRET]") {
			t.Fatalf("read_file: %s", out)
		}
		code, body := raw(t, "GET", d.URL+"/v1/conversations/secrets/paths/main/files?path=s.txt", d.key, "")
		if code != 200 || body != "in a file [REDACTED:SECRET]\n" {
			t.Fatalf("download: %d %q", code, body)
		}
		ok(t, "grep", map[string]any{"pattern": "plum", "path": "/home/user"}, nil)
	})
	t.Run("bash", func(t *testing.T) {
		out := ok(t, "bash", map[string]any{"command": `echo "$API_TOKEN"; printf %s "$API_TOKEN" | base64; echo "$GREETING"`,
			"env": map[string]string{"GREETING": "hi-bash"}}, secrets)
		if !strings.Contains(out, "hi-bash") {
			t.Fatalf("env did not reach bash: %s", out)
		}
	})
	t.Run("run_analysis", func(t *testing.T) {
		ok(t, "run_analysis", map[string]any{"analysisType": "custom", "parameters": map[string]any{},
			"code": "import os, json\nprint(json.dumps({'t': os.environ['API_TOKEN']}))"}, secrets)
	})
	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			args    map[string]any
			secrets map[string]string
		}{
			{"bad secret name", args, map[string]string{"1BAD": e2eSecret}},
			{"secret name with =", args, map[string]string{"A=B": e2eSecret}},
			{"reserved prefix", args, map[string]string{"SANDLOT_X": e2eSecret}},
			{"short secret", args, map[string]string{"T": "short"}},
			{"oversize secret", args, map[string]string{"T": strings.Repeat("v", 5000)}},
			{"bad env name", map[string]any{"language": "python", "code": "1", "env": map[string]string{"a-b": "1"}}, nil},
			{"env value not a string", map[string]any{"language": "python", "code": "1", "env": map[string]any{"A": 1}}, nil},
			{"oversize env value", map[string]any{"language": "python", "code": "1", "env": map[string]string{"A": strings.Repeat("v", 40000)}}, nil},
			{"name in env and secrets", map[string]any{"language": "python", "code": "1", "env": map[string]string{"API_TOKEN": "x"}}, secrets},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, out := call(t, "run_code", tc.args, tc.secrets)
				if code != 400 || !strings.Contains(out, "invalid_argument") {
					t.Fatalf("%d %s", code, out)
				}
				if strings.Contains(out, e2eSecret) {
					t.Fatalf("the error echoes the value: %s", out)
				}
			})
		}
	})
}
