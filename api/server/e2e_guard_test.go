package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/guard/guardtest"
)

// TestE2EFileGuard attacks the guard of a real `sandlot serve` (real
// runtime, the bootstrap tenant in enforce mode) from inside a sandbox: a
// text file written with a leading NUL or invalid UTF-8 byte, a 3 MiB
// file with secrets at the chunk boundaries, a PNG with a secret in its
// metadata, and image results that are not images.
func TestE2EFileGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	runtimePreconditions(t)
	dir, err := os.MkdirTemp("", "sl-e2eg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d := startDaemon(t, dir)
	defer d.cleanup(t, d.key)
	const conv = "/v1/conversations/guard/paths/main"
	tool := func(t *testing.T, name string, args map[string]any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"conversationId": "guard", "args": args})
		code, out := raw(t, "POST", d.URL+"/v1/tools/"+name, d.key, string(body))
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, out)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: %v: %s", name, err, out)
		}
		return v
	}
	// The sandbox writes the file itself, as a program there would.
	pyWrite := func(t *testing.T, path string, data []byte) {
		t.Helper()
		code := fmt.Sprintf("import base64\nopen(%q, 'wb').write(base64.b64decode(%q))", path, base64.StdEncoding.EncodeToString(data))
		if r := tool(t, "run_code", map[string]any{"language": "python", "code": code}); r["success"] != true {
			t.Fatalf("write %s: %v", path, r)
		}
	}

	text, red := guardtest.SecretText()
	for _, tc := range []struct{ name, prefix string }{{"NUL prefix", "\x00"}, {"invalid UTF-8 prefix", "\xff"}} {
		t.Run(tc.name, func(t *testing.T) {
			pyWrite(t, "/home/user/f.txt", []byte(tc.prefix+text))
			if code, got := raw(t, "GET", d.URL+conv+"/files?path=f.txt", d.key, ""); code != 200 || got != tc.prefix+red {
				t.Fatalf("download: %d %q, want %q", code, got, tc.prefix+red)
			}
			r := tool(t, "read_file", map[string]any{"path": "f.txt"})
			// JSON carries the invalid byte as U+FFFD.
			if c, _ := r["content"].(string); strings.Contains(c, "ghp_") || !strings.HasSuffix(c, red) {
				t.Fatalf("read_file: %q", c)
			}
		})
	}
	t.Run("3 MiB exact", func(t *testing.T) {
		file, want := guardtest.LargeText(3<<20, agent.ChunkSize)
		if code, out := raw(t, "PUT", d.URL+conv+"/files?path=big.txt", d.key, file); code != 200 {
			t.Fatalf("upload: %d %s", code, out)
		}
		_, got := raw(t, "GET", d.URL+conv+"/files?path=big.txt", d.key, "")
		compareLarge(t, got, want)
	})
	t.Run("PNG file", func(t *testing.T) {
		email := guardtest.Email()
		img := guardtest.PNG("Author", email)
		pyWrite(t, "/home/user/plot.png", img)
		_, got := raw(t, "GET", d.URL+conv+"/files?path=plot.png", d.key, "")
		if strings.Contains(got, email) || len(got) != len(img) {
			t.Fatalf("PNG: %d bytes (want %d), secret present %v", len(got), len(img), strings.Contains(got, email))
		}
		if _, err := png.Decode(strings.NewReader(got)); err != nil {
			t.Fatalf("the guarded PNG does not decode: %v", err)
		}
	})
	t.Run("image results", func(t *testing.T) {
		tok, email := guardtest.GitHubToken(), guardtest.Email()
		code := fmt.Sprintf(`import base64
class Fake:
    def _repr_png_(self):
        return b"not a png " + %q.encode()
class Tagged:
    def _repr_png_(self):
        return base64.b64decode(%q)
display(Fake())
display(Tagged())
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
`, tok, base64.StdEncoding.EncodeToString(guardtest.PNG("Comment", "for "+email)))
		body, _ := json.Marshal(map[string]any{"conversationId": "guard", "args": map[string]any{"language": "python", "code": code}})
		status, out := raw(t, "POST", d.URL+"/v1/tools/run_code", d.key, string(body))
		if status != 200 {
			t.Fatalf("run_code: %d %s", status, out)
		}
		var res api.RunCodeResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != 4 { // two displays, plot's value, the figure
			t.Fatalf("%d results", len(res.Results))
		}
		if r := res.Results[0]; r.PNG != "" || !strings.Contains(r.Text, "[REDACTED:INVALID_IMAGE]") {
			t.Errorf("fake PNG passed: %+v", r)
		}
		for _, i := range []int{1, 3} {
			b, err := base64.StdEncoding.DecodeString(res.Results[i].PNG)
			if err != nil || bytes.Contains(b, []byte(email)) {
				t.Fatalf("result %d: %v, secret present %v", i, err, bytes.Contains(b, []byte(email)))
			}
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Errorf("result %d does not decode: %v", i, err)
			}
		}
		// matplotlib's own metadata is clean and stays.
		if fig, _ := base64.StdEncoding.DecodeString(res.Results[3].PNG); !bytes.Contains(fig, []byte("Matplotlib version")) {
			t.Errorf("the figure lost its Software text")
		}
		if strings.Contains(out, tok) {
			t.Error("the token leaked")
		}
	})
}
