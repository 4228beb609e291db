package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// daemon is a `sandlot serve` of the test's, with the bootstrap tenant's
// key (the console's user), another tenant's and an admin tenant's.
type daemon struct {
	url, key, otherKey, adminKey string
}

// serve starts `sandlot serve` on the local provider with a fresh data
// dir, and makes a second tenant.
func serve(t *testing.T) *daemon { return serveWith(t) }

// serveWith is serve with more flags for `sandlot serve`.
func serveWith(t *testing.T, extra ...string) *daemon {
	t.Helper()
	bin := testenv.SandlotBinary(t)
	debiantest.Default(t) // the default template, from the tests' shared image store
	data := t.TempDir()
	state, err := os.MkdirTemp("", "sl-console-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) }) // registered first: runs after serve stopped
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--state-dir", state,
		"--pool-size", "0", "--providers", "local", "--images-dir", debiantest.StoreDir())
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), "SANDLOT_ADDR=")
	srv := testenv.StartServe(t, cmd, data, 60*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandlot serve stderr:\n%s", srv.Log())
		}
		if !srv.Exited() {
			srv.Stop(t, 30*time.Second)
		}
	})
	b, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatalf("bootstrap key: %v", err)
	}
	d := &daemon{url: srv.URL, key: strings.TrimSpace(string(b))}
	out, err := exec.Command(bin, "tenant", "create", "other-tenant", "--data-dir", data, "--json").Output()
	var created struct {
		APIKey string `json:"apiKey"`
	}
	if err != nil || json.Unmarshal(out, &created) != nil || created.APIKey == "" {
		t.Fatalf("tenant create: %v %s", err, out)
	}
	d.otherKey = created.APIKey
	out, err = exec.Command(bin, "tenant", "create", "operators", "--admin", "--data-dir", data, "--json").Output()
	created.APIKey = ""
	if err != nil || json.Unmarshal(out, &created) != nil || created.APIKey == "" {
		t.Fatalf("tenant create --admin: %v %s", err, out)
	}
	d.adminKey = created.APIKey
	res, err := http.Get(d.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	testenv.Require(t, res.StatusCode == 200, fmt.Sprintf("sandlot serve ready with a sandbox provider (/readyz: %d %.200s)", res.StatusCode, body))
	return d
}

// api calls /v1 with key and decodes the answer into out (may be nil).
func (d *daemon) api(t *testing.T, key, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, d.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// runCode runs code in a conversation's main path with key and returns
// the context id.
func (d *daemon) runCode(t *testing.T, key, conv, code string) string {
	t.Helper()
	var res struct {
		Success   bool   `json:"success"`
		ContextID string `json:"contextId"`
	}
	d.api(t, key, "POST", "/v1/tools/run_code", map[string]any{"conversationId": conv, "args": map[string]any{"language": "python", "code": code}}, &res)
	if !res.Success || res.ContextID == "" {
		t.Fatalf("run_code in %s: %+v", conv, res)
	}
	return res.ContextID
}

// file reads a file of a conversation's main path with key.
func (d *daemon) file(t *testing.T, key, conv, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", d.url+"/v1/conversations/"+conv+"/paths/main/files?path="+url.QueryEscape(path), nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
