package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/api/server/servertest"
)

// keySeen is a server that records the key of each request.
type keySeen struct {
	*httptest.Server
	mu   sync.Mutex
	keys []string
}

func newKeySeen(t *testing.T, h http.Handler) *keySeen {
	k := &keySeen{}
	k.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.keys = append(k.keys, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		k.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(k.Close)
	return k
}

func (k *keySeen) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}

func (k *keySeen) last() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.keys) == 0 {
		return ""
	}
	return k.keys[len(k.keys)-1]
}

// cliRun runs the CLI and returns its exit status, stdout and stderr.
func cliRun(args ...string) (int, string, string) {
	var out, errw bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(""), &out, &errw)
	return code, out.String(), errw.String()
}

// TestClientConfig: contexts added with sandlot config make the client
// commands work from any directory; the server and the key come from the
// flag, then the environment, then the selected context, then the data
// dir; a context's key never goes to another server; keys in files others
// can read are refused; a misspelt key of the file names the allowed ones.
func TestClientConfig(t *testing.T) {
	e := servertest.NewEnv(nil)
	a := newKeySeen(t, e.Handler)
	b := newKeySeen(t, e.Handler)
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "xdg"))
	t.Setenv(envClientConfig, "")
	t.Setenv(envContext, "")
	t.Setenv(envURL, "")
	t.Setenv(envAPIKey, "")
	t.Setenv(envDataDir, "")
	cfgPath := filepath.Join(home, "xdg", "sandlot", "config.yaml")

	keyFile := filepath.Join(home, "a-key")
	os.WriteFile(keyFile, []byte(e.KeyA+"\n"), 0o600)
	if code, _, errw := cliRun("config", "add-context", "a", "--url", a.URL, "--api-key-file", keyFile); code != 0 {
		t.Fatalf("add-context a: %d %s", code, errw)
	}
	if code, _, errw := cliRun("config", "add-context", "b", "--url", b.URL, "--api-key", e.KeyB); code != 0 {
		t.Fatalf("add-context b: %d %s", code, errw)
	}
	if fi, err := os.Stat(cfgPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file %s: %v %v, want mode 0600", cfgPath, fi.Mode(), err)
	}
	if raw, _ := os.ReadFile(cfgPath); !strings.Contains(string(raw), "current-context: a") {
		t.Fatalf("the first context is not current:\n%s", raw)
	}

	// From any directory: no .sandlot here.
	t.Chdir(t.TempDir())
	if code, _, errw := cliRun("ctx", "ls"); code != 0 || a.last() != e.KeyA {
		t.Fatalf("ctx ls on context a: exit %d, key %q; %s", code, a.last(), errw)
	}
	// $SANDLOT_CONTEXT picks another for one command; use-context for all.
	t.Setenv(envContext, "b")
	if code, _, errw := cliRun("ctx", "ls"); code != 0 || b.last() != e.KeyB {
		t.Fatalf("SANDLOT_CONTEXT=b: exit %d, key %q; %s", code, b.last(), errw)
	}
	t.Setenv(envContext, "")
	cliRun("config", "use-context", "b")
	if code, out, _ := cliRun("config", "current-context"); code != 0 || out != "b\n" {
		t.Fatalf("current-context: %d %q", code, out)
	}
	// --url elsewhere: b's key does not go there.
	before := a.count()
	cliRun("ctx", "ls", "--url", a.URL)
	if a.count() == before || a.last() != "" {
		t.Fatalf("b's key went to a's URL: %q", a.last())
	}
	// The flag, then the environment, beat the context.
	cliRun("ctx", "ls", "--api-key", "e2b_flag")
	if b.last() != "e2b_flag" {
		t.Fatalf("--api-key lost to the context: %q", b.last())
	}
	t.Setenv(envAPIKey, "e2b_env")
	cliRun("ctx", "ls")
	if b.last() != "e2b_env" {
		t.Fatalf("$SANDLOT_API_KEY lost to the context: %q", b.last())
	}
	t.Setenv(envAPIKey, "")

	// get-contexts never shows a key.
	code, out, _ := cliRun("config", "get-contexts", "-o", "json")
	var views []contextView
	if code != 0 || json.Unmarshal([]byte(out), &views) != nil || len(views) != 2 || strings.Contains(out, e.KeyB) || strings.Contains(out, e.KeyA) {
		t.Fatalf("get-contexts: %d %s", code, out)
	}

	// Keys others may read are refused, in the file and in a key file.
	os.Chmod(cfgPath, 0o644)
	if code, _, errw := cliRun("ctx", "ls"); code != 5 || !strings.Contains(errw, "chmod 600 "+cfgPath) {
		t.Fatalf("a 0644 config holding a key: exit %d, %q", code, errw)
	}
	os.Chmod(cfgPath, 0o600)
	cliRun("config", "use-context", "a")
	os.Chmod(keyFile, 0o640)
	if code, _, errw := cliRun("ctx", "ls"); code != 5 || !strings.Contains(errw, "chmod 600 "+keyFile) {
		t.Fatalf("a 0640 key file: exit %d, %q", code, errw)
	}
	os.Chmod(keyFile, 0o600)

	// A misspelt key names the allowed ones, as every edge does.
	os.WriteFile(cfgPath, []byte("current-context: a\ncontexts:\n  a:\n    ur: http://x\n"), 0o600)
	if code, _, errw := cliRun("ctx", "ls"); code != 2 || !strings.Contains(errw, `unknown field "ur" (allowed: key, key-file, url)`) {
		t.Fatalf("misspelt key: exit %d, %q", code, errw)
	}
	os.WriteFile(cfgPath, []byte("curent-context: a\n"), 0o600)
	if code, _, errw := cliRun("ctx", "ls"); code != 2 || !strings.Contains(errw, `unknown field "curent-context" (allowed: contexts, current-context)`) {
		t.Fatalf("misspelt top key: exit %d, %q", code, errw)
	}

	// $SANDLOT_CLIENT_CONFIG names another file; a context it lacks is
	// not_found; delete-context removes one.
	other := filepath.Join(home, "other.yaml")
	t.Setenv(envClientConfig, other)
	cliRun("config", "add-context", "a", "--url", a.URL, "--api-key-file", keyFile)
	t.Setenv(envContext, "nope")
	if code, _, errw := cliRun("ctx", "ls"); code != 3 || !strings.Contains(errw, `context "nope"`) {
		t.Fatalf("unknown context: exit %d, %q", code, errw)
	}
	t.Setenv(envContext, "")
	if code, _, _ := cliRun("config", "delete-context", "a"); code != 0 {
		t.Fatal("delete-context")
	}
	if code, _, _ := cliRun("config", "current-context"); code != 3 {
		t.Fatalf("current-context after deleting it: exit %d", code)
	}
}
