package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/telemetry/export"
)

// TestRefusedBeforeCreate: on the daemon serve runs (the Debian default
// image, which has no R), a first run_code in r is refused with 400 and a
// sentence naming the template's languages, and leaves no context and no
// sandbox behind: before, the call made a sandbox, found no R kernel in it
// and left it running for the context's TTL.
func TestRefusedBeforeCreate(t *testing.T) {
	needRuntime(t)
	debiantest.Default(t)
	dir := t.TempDir()
	state, err := os.MkdirTemp("", "slr-") // short: socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: state,
		Images:          Images{Default: DefaultImageDebian, Dir: debiantest.StoreDir()},
		ShutdownTimeout: 5 * time.Second, Logger: export.NewLogger(&testenv.Buffer{}, "error")})
	call := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, b := call("POST", "/v1/tools/run_code", `{"conversationId":"refused","args":{"language":"r","code":"1+1"}}`)
	var e api.Error
	json.Unmarshal(b, &e)
	if status != 400 || e.Code != "invalid_argument" || !strings.Contains(e.Message, `template "default" has no r kernel (it offers python, javascript, typescript, bash, sh)`) {
		t.Fatalf("run_code in r: %d %s", status, b)
	}
	_, b = call("GET", "/v1/contexts?status=", "")
	var l api.ContextList
	if err := json.Unmarshal(b, &l); err != nil || len(l.Contexts) != 0 {
		t.Fatalf("contexts after a refused call: %s", b)
	}
	p, err := local.New(local.Config{StateDir: state, AgentPath: os.Getenv("SANDLOT_AGENT_BIN")})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := p.List(context.Background()); err != nil || len(ids) != 0 {
		t.Fatalf("sandboxes after a refused call: %v %v", ids, err)
	}
	// The same conversation runs python at once.
	if status, b := call("POST", "/v1/tools/run_code", `{"conversationId":"refused","args":{"language":"python","code":"print(1+1)"}}`); status != 200 || !strings.Contains(string(b), `"stdout":"2\n"`) {
		t.Fatalf("python after: %d %s", status, b)
	}
}
