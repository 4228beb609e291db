package e2b

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/codeinterp"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools/toolstest"
)

const apiKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// secret is what the test guard redacts: the E2B routes must only hand out
// guarded output (Manager.Execute results and Use's guarded sandbox).
const secret = "sk-live-0123456789SECRET"

// redactGuard is a hand-written contexts.Guard that redacts secret.
type redactGuard struct{}

func (redactGuard) Text(ctx context.Context, tenantID, s string) string {
	return strings.ReplaceAll(s, secret, "[REDACTED]")
}

func (redactGuard) Stream(ctx context.Context, tenantID string) contexts.StreamRedactor {
	return &redactStream{}
}

func (redactGuard) File(ctx context.Context, tenantID string) contexts.FileRedactor {
	return &redactFile{}
}

func (redactGuard) Image(ctx context.Context, tenantID, format string, data []byte) ([]byte, string) {
	if strings.Contains(string(data), secret) {
		return nil, "[REDACTED]"
	}
	return data, ""
}

type redactFile struct{ st redactStream }

func (f *redactFile) Write(p []byte) []byte { return []byte(f.st.Write(string(p))) }
func (f *redactFile) Flush() []byte         { return []byte(f.st.Flush()) }

// redactStream holds back a tail shorter than secret so a secret split
// across chunks is still caught.
type redactStream struct{ pending string }

func (r *redactStream) Write(chunk string) string {
	s := strings.ReplaceAll(r.pending+chunk, secret, "[REDACTED]")
	keep := min(len(secret)-1, len(s))
	r.pending = s[len(s)-keep:]
	return s[:len(s)-keep]
}

// FlushIdle releases the held tail when the stream went quiet, as the
// real guard does (contexts.IdleFlusher).
func (r *redactStream) FlushIdle() string { return r.Flush() }

func (r *redactStream) Flush() string {
	s := r.pending
	r.pending = ""
	return s
}

// npmReady makes sure node_modules matches package-lock.json.
func npmReady(t *testing.T) {
	t.Helper()
	testenv.RequireBinary(t, "node")
	ready := true
	for _, pkg := range []string{"e2b", "e2b-245"} {
		if _, err := os.Stat("node_modules/" + pkg + "/package.json"); err != nil {
			ready = false
		}
	}
	if ready {
		return
	}
	cmd := exec.Command(testenv.RequireBinary(t, "npm"), "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

// sandboxProvider returns the provider sandboxes run on: the real local
// (OCI) provider when running as root with a runtime, which CI always
// does; elsewhere real sandlot-agent processes on the host
// (toolstest.HostProvider).
// E2E_PROVIDER=hostagent forces the latter.
func sandboxProvider(t *testing.T) contexts.Provider {
	t.Helper()
	bin := testenv.AgentBinary(t)
	if os.Getenv("E2E_PROVIDER") != "hostagent" {
		if os.Geteuid() == 0 {
			dir, err := os.MkdirTemp("", "sl-e2b-")
			if err != nil {
				t.Fatal(err)
			}
			p, err := local.New(local.Config{StateDir: dir, AgentPath: bin, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				t.Cleanup(func() {
					ids, _ := p.List(context.Background())
					for _, id := range ids {
						p.Destroy(context.Background(), id)
					}
					os.RemoveAll(dir)
				})
				return p
			}
			os.RemoveAll(dir)
			if testenv.InCI() {
				t.Fatalf("local provider: %v", err)
			}
			t.Logf("local provider unavailable (%v); using host agent processes", err)
		} else if testenv.InCI() {
			t.Fatal("CI runs the E2B suite as root on the local provider")
		}
	}
	return toolstest.NewHostProvider(t)
}

// server starts sandlot's E2B surface over a real contexts.Manager.
func server(t *testing.T, provider contexts.Provider) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := contexts.NewManager(memory.New(), provider, contexts.Config{PoolSize: -1, MaxPerTenant: 50, MaxPerConversation: 5, Guard: redactGuard{}, Logger: log})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	h := e2bcompat.New(e2bcompat.Config{Manager: m, Logger: log, Tenants: e2bcompattest.Tenants{apiKey: "tenant-e2e"}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// TestOfficialSDK runs the node:test suite (*.test.mjs) with the official
// SDKs, configured only through E2B_API_KEY, E2B_API_URL and
// E2B_SANDBOX_URL: against the E2B handler over a real Manager in this
// process, and against a real `sandlot serve` (SANDLOT_BIN, as `make test`
// sets it, or a build of cmd/sandlot).
func TestOfficialSDK(t *testing.T) {
	t.Parallel()
	npmReady(t)
	// The two suites run at once: each has its own server, sandboxes
	// and node process.
	t.Run("inprocess", func(t *testing.T) {
		t.Parallel()
		p := sandboxProvider(t)
		t.Logf("sandboxes on provider %s", p.Name())
		url := server(t, p)
		runNode(t, url, apiKey, "E2E_SECRET="+secret)
	})
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		testenv.RequireRoot(t) // sandlot serve runs the local provider
		// The R and Java cells run on the code-interpreter template, from
		// the tests' shared image store (built once per machine).
		debiantest.Image(t, codeinterp.ImageConfig(), codeinterp.Template)
		url, key := serve(t, testenv.SandlotBinary(t))
		// The real guard (the bootstrap tenant enforces) finds an AWS
		// access key id assembled inside the sandbox.
		runNode(t, url, key, "E2E_SECRET=AKIA"+"QWERTYUIOPASDFGH", "E2E_REDACTED=[REDACTED:AWS_ACCESS_KEY]",
			"E2E_ROOT=1", // serve's sandboxes are on the default image template, which has root
			"E2E_CODE_INTERPRETER=1",
			"E2E_SNAPSHOTS=1") // serve keeps templates in an image store
	})
}

// serve starts `sandlot serve` on a free port with a fresh data dir and
// returns its URL and the bootstrap tenant's key.
func serve(t *testing.T, bin string) (string, string) {
	t.Helper()
	return serveWith(t, bin)
}

// serveWith is serve with extra flags.
func serveWith(t *testing.T, bin string, extra ...string) (string, string) {
	t.Helper()
	data := t.TempDir()
	// Its own state dir: one state dir belongs to one daemon (serve locks
	// it). A short path, as agent socket paths are bounded.
	state, err := os.MkdirTemp("", "sl-serve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) }) // registered first: runs after serve stopped
	url, key, _ := startServe(t, bin, data, state, extra...)
	return url, key
}

// startServe starts `sandlot serve` on data and state dirs of the
// caller's (a restart reuses them) and checks that it serves E2B with a
// sandbox provider.
func startServe(t *testing.T, bin, data, state string, extra ...string) (string, string, *testenv.Serve) {
	t.Helper()
	debiantest.Default(t) // the default template, from the tests' shared image store
	args := []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--state-dir", state,
		"--pool-size", "0", "--providers", "local", "--images-dir", debiantest.StoreDir()}
	cmd := exec.Command(bin, append(args, extra...)...)
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
	url := srv.URL
	b, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatalf("bootstrap key: %v", err)
	}
	key := strings.TrimSpace(string(b))
	req, _ := http.NewRequest("GET", url+"/v2/sandboxes", nil)
	req.Header.Set("X-API-KEY", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(strings.TrimSpace(string(body)), "[") {
		t.Fatalf("sandlot serve does not mount the E2B handler: GET /v2/sandboxes: %d %.200s", resp.StatusCode, body)
	}
	// The suite needs sandboxes: serve must have a usable provider.
	resp, err = http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	testenv.Require(t, resp.StatusCode == 200, fmt.Sprintf("sandlot serve ready with a sandbox provider (/readyz: %d %.200s)", resp.StatusCode, body))
	return url, key, srv
}

// runNode runs node --test on *.test.mjs against url.
func runNode(t *testing.T, url, key string, env ...string) {
	t.Helper()
	// 15 minutes: the R and Java cells start an R and a JVM cold.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// --test-force-exit: the SDK leaves a 60 s request timer armed when a
	// runCode call fails (as the tests provoke on purpose).
	args := []string{"--test", "--test-concurrency=1", "--test-force-exit", "--test-reporter=spec"}
	if f := os.Getenv("E2E_FILTER"); f != "" {
		args = append(args, "--test-name-pattern="+f)
	}
	files, _ := filepath.Glob("*.test.mjs")
	cmd := exec.CommandContext(ctx, "node", append(args, files...)...)
	cmd.Env = append(os.Environ(), "E2B_API_KEY="+key, "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_DEBUG=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test output:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
	if !strings.Contains(string(out), "fail 0") {
		t.Fatal("node --test reported failures")
	}
}
