package desktop_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// TestLiveViewInBrowser loads a desktop's live view in a real browser:
// headless Chromium in the desktop sandbox itself opens noVNC's page
// from the sandbox's stream port with the session's password, connects
// through websockify to x11vnc, and screenshots what it shows. The
// screenshot must be the remote desktop (thousands of colours: XFCE's
// wallpaper and panel), not noVNC's connect dialog or a blank page. With
// SANDLOT_TEST_ARTIFACTS set, the screenshot is kept there to look at.
func TestLiveViewInBrowser(t *testing.T) {
	t.Parallel()
	dm, cm := newManagers(t, desktop.Config{})
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "live", PathID: "main"}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		h, err := dm.Health(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if h.OK() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("desktop not healthy: %+v", h)
		}
		time.Sleep(time.Second)
	}
	did := contexts.Identity{TenantID: "t1", ConversationID: "live", PathID: desktop.PathPrefix + "main"}
	rec, err := cm.Lookup(ctx, did)
	if err != nil {
		t.Fatal(err)
	}
	pw := desktop.PasswordOf(dm, rec.ID)
	if pw == "" {
		t.Fatal("no session password")
	}
	if u, err := cm.Usage(ctx, "t1", rec.ID); err == nil {
		t.Logf("memory of a desktop with Chromium open: %d MiB (%d tasks)", u.MemoryBytes>>20, u.PIDs)
	}
	// The browser screenshots at its load event, which noVNC's page
	// reaches before the first frame arrives: a wrapper page holds the
	// load event back (an image answered after a delay) while noVNC
	// connects in its frame. On a loaded machine the first frame can come
	// later than the delay: a screenshot that is not the desktop yet is
	// taken again with a longer one, bounded.
	var shot []byte
	var n int
	for i, delay := range []int{8, 20, 45} {
		shot = liveViewShot(t, cm, did, pw, delay, i)
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatalf("the browser's screenshot: %v", err)
		}
		if n = colours(img); n >= 500 {
			t.Logf("live view screenshot %v after %d s, %d colours", img.Bounds().Size(), delay, n)
			break
		}
		t.Logf("live view screenshot after %d s: %d colours, not the remote desktop yet", delay, n)
	}
	if dir := os.Getenv("SANDLOT_TEST_ARTIFACTS"); dir != "" {
		os.WriteFile(filepath.Join(dir, "liveview.png"), shot, 0o644)
	}
	if n < 500 {
		t.Errorf("the live view shows %d colours: not the remote desktop (a connect dialog or an error page)", n)
	}
}

// liveViewShot has headless Chromium in the desktop sandbox open noVNC's
// page from the sandbox's stream port with the session's password, in a
// wrapper page whose load event waits delay seconds, and returns its
// screenshot (a PNG).
func liveViewShot(t *testing.T, cm *contexts.Manager, did contexts.Identity, pw string, delay, attempt int) []byte {
	t.Helper()
	ctx := context.Background()
	port := 8001 + attempt
	var shot []byte
	err := cm.Use(ctx, did, contexts.CreateOptions{Template: desktop.Template},
		func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			page := `<html><body style="margin:0"><iframe style="border:0" width="1024" height="768" src="http://127.0.0.1:6080/vnc.html?autoconnect=true&resize=scale&password=` + pw + `"></iframe><img src="/slow"></body></html>`
			server := fmt.Sprintf(`import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/slow":
            time.sleep(%d)
            self.send_response(404); self.end_headers(); return
        b = open("/tmp/wrap.html", "rb").read()
        self.send_response(200); self.send_header("Content-Type", "text/html"); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", %d), H).serve_forever()`, delay, port)
			if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: "/tmp/wrap.html", Data: []byte(page)}); err != nil {
				return err
			}
			go sb.Exec(context.WithoutCancel(ctx), agent.ExecParams{Argv: []string{"python3", "-c", server}, TimeoutMs: 120_000}, nil)
			// Headless Chromium writes the screenshot and then stays (the
			// live view's websocket holds it): it is ended once it said
			// so, rather than at the call's timeout two minutes later.
			res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"bash", "-c", fmt.Sprintf(`rm -f /tmp/live.png
for i in $(seq 100); do curl -fsS -o /dev/null http://127.0.0.1:%[1]d/ && break; sleep 0.1; done
chromium --headless --user-data-dir=/tmp/.live-profile --window-size=1024,768 --screenshot=/tmp/live.png http://127.0.0.1:%[1]d/ >/tmp/live.log 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null && ! grep -q 'bytes written to file /tmp/live.png' /tmp/live.log; do sleep 0.2; done
kill $pid 2>/dev/null; wait $pid; status=$?
cat /tmp/live.log >&2
grep -q 'bytes written to file /tmp/live.png' /tmp/live.log || exit $status`, port)}, TimeoutMs: 120_000}, nil)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				t.Logf("chromium --headless: exit %d: %s", res.ExitCode, res.Stderr)
			}
			return contexts.ReadFile(ctx, sb, "/tmp/live.png", func(c contexts.FileChunk) error {
				shot = append(shot, c.Data...)
				return nil
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	return shot
}

// colours counts the distinct colours of img, up to 100,000.
func colours(img image.Image) int {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			if len(seen) >= 100000 {
				return len(seen)
			}
		}
	}
	return len(seen)
}
