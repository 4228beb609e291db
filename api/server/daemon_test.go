package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// These tests run `sandlot serve` as a subprocess ($SANDLOT_BIN, else a
// fresh go build) over real HTTP, with the real store, manager and runtime.
// They need root, an OCI runtime and the agent binary ($SANDLOT_AGENT_BIN);
// without them they skip, unless CI=true, where that is a failure.

func runtimePreconditions(t testing.TB) {
	t.Helper()
	testenv.RequireOCIRuntime(t)
	// The daemon finds the agent through the environment.
	_, err := os.Stat(testenv.Env(t, "SANDLOT_AGENT_BIN"))
	testenv.Require(t, err == nil, fmt.Sprintf("SANDLOT_AGENT_BIN: %v", err))
}

// daemon is one `sandlot serve` process.
type daemon struct {
	cmd     *exec.Cmd
	url     string
	key     string
	dataDir string
	logs    *fileLog
	done    chan error
	exited  bool
}

// fileLog is a daemon's stderr, read back for failure reports.
type fileLog struct{ path string }

func (f *fileLog) String() string {
	b, _ := os.ReadFile(f.path)
	return string(b)
}

var listenRE = regexp.MustCompile(`sandlot listening on (http://\S+)`)

// startDaemon starts serve on a free loopback port over dataDir.
func startDaemon(t testing.TB, dataDir string, extra ...string) *daemon {
	t.Helper()
	// --bootstrap-admin: the guard subtest switches the guard off with the
	// first start's key, which is an ordinary tenant's unless asked.
	// The default template comes from the tests' shared image store.
	debiantest.Default(t)
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir,
		"--state-dir", filepath.Join(dataDir, "run"), "--pool-size", "0", "--shutdown-timeout", "20s", "--bootstrap-admin",
		"--images-dir", debiantest.StoreDir()}, extra...)
	cmd := exec.Command(testenv.SandlotBinary(t), args...)
	// Files, not pipes: sandboxes outlive the daemon by design, and a
	// child holding a pipe would keep cmd.Wait copying forever.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.CreateTemp(dataDir, "serve-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	logf.Close()
	logs := &fileLog{path: logf.Name()}
	d := &daemon{cmd: cmd, dataDir: dataDir, logs: logs, done: make(chan error, 1)}
	go func() { d.done <- cmd.Wait() }()
	urlc := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
				return
			}
		}
	}()
	select {
	case d.url = <-urlc:
	case err := <-d.done:
		t.Fatalf("serve exited: %v\n%s", err, logs)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("serve did not start\n%s", logs)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	d.key = strings.TrimSpace(string(b))
	t.Cleanup(func() {
		if !d.exited {
			d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("serve logs (last 4 KB):\n%s", tail(d.logs.String(), 4096))
		}
	})
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop(t testing.TB) {
	t.Helper()
	if d.exited {
		t.Fatal("serve already stopped")
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.exited = true
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, tail(d.logs.String(), 4096))
		}
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		t.Fatal("serve did not stop within 60 s of SIGTERM")
	}
}

func (d *daemon) client(key string) *client.Client {
	return client.New(d.url, client.WithAPIKey(key))
}

// cleanup terminates every active context of key's tenant, so no sandbox
// outlives the test.
func (d *daemon) cleanup(t testing.TB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		c := d.client(k)
		for {
			l, err := c.ListContexts(context.Background(), client.ListOptions{Status: []string{"active"}, Limit: 1000})
			if err != nil || len(l.Contexts) == 0 {
				break
			}
			for _, r := range l.Contexts {
				c.DeleteContext(context.Background(), r.ID)
			}
		}
	}
}

// raw does one HTTP call and returns the status and body.
func raw(t testing.TB, method, url, key, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// bearer is an http.RoundTripper that adds an API key.
type bearer string

func (k bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}
