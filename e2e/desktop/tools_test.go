package desktop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/network/nettest"
)

// TestDesktopToolsServe calls the desktop tools of `sandlot serve
// --network` over /v1: a screenshot (a PNG of the screen, the desktop
// drawn: the session's start waits for it, within the stream-ready
// wait, long here for a loaded machine), an action, and
// the live view, whose URL is answered through the port route (TLS in
// front) with noVNC's page and a WebSocket that reaches x11vnc asking for
// VNC authentication; the session counts as a desktop session.
func TestDesktopToolsServe(t *testing.T) {
	nettest.Require(t)
	debiantest.Default(t)
	debiantest.Image(t, desktop.ImageConfig(), desktop.Template)
	_, srvURL, key := serve(t, "--desktop-stream-wait", "3m")
	caFile := tlsFront(t, srvURL)
	// serve leaves sandboxes running when it stops (a restart takes them
	// over): the conversation is ended first, pass or fail.
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", srvURL+"/v1/conversations/desk", nil)
		req.Header.Set("X-API-KEY", key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				t.Errorf("end the conversation: %d", resp.StatusCode)
			}
		}
	})

	call := func(tool string, args string) []byte {
		t.Helper()
		body := `{"conversationId":"desk","args":` + args + `}`
		req, _ := http.NewRequest("POST", srvURL+"/v1/tools/"+tool, strings.NewReader(body))
		req.Header.Set("X-API-KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tool, resp.StatusCode, b)
		}
		return b
	}
	start := time.Now()
	var shot struct {
		PNG           string `json:"png"`
		Width, Height int
	}
	if err := json.Unmarshal(call("desktop_screenshot", `{}`), &shot); err != nil {
		t.Fatal(err)
	}
	t.Logf("first screenshot through /v1 after %s", time.Since(start).Round(time.Millisecond))
	raw, err := base64.StdEncoding.DecodeString(shot.PNG)
	if err != nil {
		t.Fatal(err)
	}
	if img, err := png.Decode(bytes.NewReader(raw)); err != nil || img.Bounds().Dx() != 1024 || img.Bounds().Dy() != 768 {
		t.Errorf("screenshot: %v", err)
	} else if n := colours(img); n < 2500 {
		t.Errorf("the first screenshot of a new session has %d colours: the desktop was not drawn", n)
	}
	call("desktop_move", `{"x":10,"y":10}`)

	var lv struct{ URL string }
	if err := json.Unmarshal(call("desktop_live_view", `{}`), &lv); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(lv.URL)
	if err != nil || u.Scheme != "https" || !strings.HasPrefix(u.Host, "6080-") || !strings.HasSuffix(u.Host, ".sandlot.localhost") ||
		u.Path != "/vnc.html" || len(u.Query().Get("password")) != 8 {
		t.Fatalf("live view URL %q", lv.URL)
	}
	pem, _ := os.ReadFile(caFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tcfg := &tls.Config{RootCAs: pool, ServerName: u.Host}
	// *.localhost is loopback: dial the TLS front for every name.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return tls.Dial("tcp4", "127.0.0.1:443", tcfg)
		}}}
	var page []byte
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := hc.Get(lv.URL)
		if err == nil {
			page, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("live view page: %v", err)
		}
		time.Sleep(time.Second)
	}
	if !bytes.Contains(page, []byte("noVNC")) {
		t.Errorf("live view page is not noVNC: %.200s", page)
	}
	// The stream's WebSocket through the route: x11vnc's handshake,
	// asking for VNC authentication (security type 2).
	conn, err := tls.Dial("tcp4", "127.0.0.1:443", tcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	wsKey := make([]byte, 16)
	rand.Read(wsKey)
	k := base64.StdEncoding.EncodeToString(wsKey)
	fmt.Fprintf(conn, "GET /websockify HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: binary\r\n\r\n", u.Host, k)
	buf := make([]byte, 4096)
	n, err := io.ReadAtLeast(conn, buf, 12)
	if err != nil {
		t.Fatal(err)
	}
	head := string(buf[:n])
	sum := sha1.Sum([]byte(k + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if !strings.HasPrefix(head, "HTTP/1.1 101") || !strings.Contains(head, base64.StdEncoding.EncodeToString(sum[:])) {
		t.Fatalf("websocket handshake: %q", head)
	}
	frames := buf[strings.Index(head, "\r\n\r\n")+4 : n]
	for len(frames) < 2+12 {
		m, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, buf[:m]...)
	}
	if got := string(frames[2 : 2+12]); got != "RFB 003.008\n" {
		t.Fatalf("first frame %q, want the RFB version", got)
	}
	// Our version, masked, then the security types: [1 type, 2 (VNC auth)].
	msg := []byte("RFB 003.008\n")
	mask := []byte{1, 2, 3, 4}
	out := append([]byte{0x82, 0x80 | byte(len(msg))}, mask...)
	for i, c := range msg {
		out = append(out, c^mask[i%4])
	}
	conn.Write(out)
	frames = frames[2+12:]
	for len(frames) < 4 {
		m, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, buf[:m]...)
	}
	if got := frames[2:4]; got[0] != 1 || got[1] != 2 {
		t.Errorf("security types %v, want [1 2] (VNC authentication)", got)
	}

	// The session counts as a desktop session.
	req, _ := http.NewRequest("GET", srvURL+"/v1/metrics/sessions", nil)
	req.Header.Set("X-API-KEY", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Desktop struct {
			Active int `json:"active_sessions"`
		} `json:"desktop"`
	}
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if m.Desktop.Active != 1 {
		t.Errorf("desktop sessions = %d, want 1", m.Desktop.Active)
	}
}
