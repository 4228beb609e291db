package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestWaitWhileTemplateBuilds: `sandlot serve` on a new data dir answers
// at once and builds its default template (here with a stand-in for
// mmdebstrap that waits in the step that installs packages). Meanwhile
// /readyz is 503 and says what it waits for (stage, step, packages set
// up), /healthz is 200, a tool call is a 503 with Retry-After that the log
// holds as an expected state at INFO under its request id (no ERROR), and
// `sandlot wait` prints the progress and gives up at its timeout. When
// the core stage is built, `sandlot wait` returns, /readyz is 200 and
// names the core as live while the full image builds; then the full
// image is live.
func TestWaitWhileTemplateBuilds(t *testing.T) {
	testenv.RequireOCIRuntime(t) // serve's provider; mmdebstrap's mount namespace needs root
	t.Setenv("SANDLOT_AGENT_BIN", testenv.AgentBinary(t))
	fake := debiantest.NewFake(t)
	t.Setenv("PATH", fake.Dir()+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--data-dir", filepath.Join(dir, "data"),
			"--state-dir", filepath.Join(dir, "run"), "--pool-size", "0", "--providers", "local", "--log-level", "info"},
			strings.NewReader(""), &out, &out)
	}()
	defer func() {
		cancel()
		<-done
	}()
	url := ""
	for deadline := time.Now().Add(time.Minute); url == ""; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", out.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if u, ok := strings.CutPrefix(l, "sandlot listening on "); ok {
				url = u
			}
		}
	}
	key, err := os.ReadFile(filepath.Join(dir, "data", keyFile))
	if err != nil {
		t.Fatal(err)
	}
	fake.Reached(t, "core")

	readyz := func(want int) api.Readiness {
		t.Helper()
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r api.Readiness
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != want {
			t.Fatalf("/readyz: %d %+v %v, want %d", resp.StatusCode, r, err, want)
		}
		return r
	}
	r := readyz(503)
	if len(r.Waiting) != 1 || r.Ready || r.Checks["template default"] != "building" {
		t.Fatalf("/readyz while the core builds: %+v", r)
	}
	w := r.Waiting[0]
	if w.What != "template default" || w.Stage != "core" || w.StageIndex != 1 || w.Stages != 2 || w.Phase != "installing packages" ||
		w.Done != debiantest.FakeDone || w.Total != debiantest.FakeTotal || w.Package != "python3-numpy" {
		t.Errorf("waiting for %+v", w)
	}
	if resp, err := http.Get(url + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz while building: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// A tool call: 503 with Retry-After, an expected state in the log.
	req, _ := http.NewRequest("POST", url+"/v1/tools/run_code", strings.NewReader(`{"conversationId":"c","args":{"language":"python","code":"1+1"}}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	rid := resp.Header.Get(api.HeaderRequestID)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "being built") {
		t.Errorf("run_code while building: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var state bool
	for _, l := range strings.Split(out.String(), "\n") {
		if !strings.Contains(l, `"request_id":"`+rid+`"`) {
			continue
		}
		if strings.Contains(l, `"level":"ERROR"`) {
			t.Errorf("an expected state logged as an error: %s", l)
		}
		state = state || strings.Contains(l, `"msg":"not ready yet"`) && strings.Contains(l, `"level":"INFO"`)
	}
	if !state {
		t.Errorf("no INFO line of the state under request id %s:\n%s", rid, out.String())
	}

	// sandlot wait gives up at its timeout, having said what it waits for.
	var wout, werr testenv.Buffer
	err = Run(context.Background(), []string{"wait", "--url", url, "--timeout", "2s"}, strings.NewReader(""), &wout, &werr)
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("wait with a short timeout: %v", err)
	}
	if want := "not ready: template default, stage core 1/2: step 5/10 installing packages, 1/4 packages set up (python3-numpy)"; !strings.Contains(werr.String(), want) {
		t.Errorf("wait printed %q, want %q", werr.String(), want)
	}

	// sandlot wait returns once the core is built.
	waited := make(chan error, 1)
	wout, werr = testenv.Buffer{}, testenv.Buffer{}
	go func() {
		waited <- Run(context.Background(), []string{"wait", "--url", url, "--timeout", "2m"}, strings.NewReader(""), &wout, &werr)
	}()
	time.Sleep(1500 * time.Millisecond) // it polls meanwhile (not asserted: any time is correct)
	fake.Release(t, "core", false)
	if err := <-waited; err != nil {
		t.Fatalf("wait: %v\n%s", err, werr.String())
	}
	if !strings.Contains(wout.String(), "ready: "+url+" (sandboxes start from the default template's core image; template default, stage full 2/2") {
		t.Errorf("wait printed %q", wout.String())
	}
	fake.Reached(t, "full")
	r = readyz(200)
	if !r.Ready || r.Live["default"] != "core" || len(r.Building) != 1 || r.Building[0].Stage != "full" {
		t.Errorf("/readyz while the full image builds: %+v", r)
	}
	fake.Release(t, "full", false)
	for deadline := time.Now().Add(time.Minute); readyz(200).Live["default"] != "full"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the full image never went live:\n%s", out.String())
		}
	}
}
