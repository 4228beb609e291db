package desktop

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/network/nettest"
)

// keyHeader sends the tenant's API key on every MCP request.
type keyHeader string

func (k keyHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-KEY", string(k))
	return http.DefaultTransport.RoundTrip(r)
}

// TestDesktopMCP drives a real desktop through `sandlot serve --network`'s
// MCP endpoint with the official Go SDK's client: desktop_screenshot is an
// image content (a PNG of the screen) beside its size as text;
// desktop_open_url opens a page in the desktop's Chromium, seen by its
// title in desktop_windows; desktop_click, desktop_key and desktop_type
// drive the browser's address bar to another page; desktop_live_view's URL
// answers noVNC's page through the port route; desktop_clipboard holds the
// address copied from the browser.
func TestDesktopMCP(t *testing.T) {
	nettest.Require(t)
	debiantest.Default(t)
	debiantest.Image(t, desktop.ImageConfig(), desktop.Template)
	_, srvURL, key := serve(t)
	caFile := tlsFront(t, srvURL)
	const conv = "mcp-desk"
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", srvURL+"/v1/conversations/"+conv, nil)
		req.Header.Set("X-API-KEY", key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tr := &sdk.StreamableClientTransport{Endpoint: srvURL + "/mcp", HTTPClient: &http.Client{Transport: keyHeader(key)}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "desktop-e2e", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	call := func(tool string, args map[string]any) *sdk.CallToolResult {
		t.Helper()
		if args == nil {
			args = map[string]any{}
		}
		args["conversationId"] = conv
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if res.IsError {
			t.Fatalf("%s: error result %s", tool, text(res))
		}
		return res
	}
	activeWindow := func(res *sdk.CallToolResult) string {
		var r struct{ ActiveWindow string }
		json.Unmarshal([]byte(text(res)), &r)
		return r.ActiveWindow
	}

	start := time.Now()
	res := call("desktop_screenshot", nil)
	t.Logf("first desktop_screenshot over MCP after %s", time.Since(start).Round(time.Millisecond))
	var img *sdk.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok {
			img = ic
		}
	}
	if img == nil || img.MIMEType != "image/png" {
		t.Fatalf("desktop_screenshot: no PNG image content: %+v", res.Content)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != desktop.DefaultWidth || cfg.Height != desktop.DefaultHeight {
		t.Fatalf("screenshot: %v, %dx%d", err, cfg.Width, cfg.Height)
	}
	if !strings.Contains(text(res), `"width":1024`) {
		t.Errorf("screenshot text: %s", text(res))
	}

	// A page of the desktop's own (noVNC, served on 6080), seen in the
	// window list by its title.
	windows := func() string { return text(call("desktop_windows", nil)) }
	call("desktop_open_url", map[string]any{"url": "http://127.0.0.1:6080/vnc.html"})
	waitTitle(t, windows, "noVNC")
	// A click gives the browser the focus; the address bar by keyboard, a
	// new URL typed, Return: Chromium's DevTools version document, whose
	// title is its address.
	// The page may still take the focus as it finishes loading (noVNC
	// focuses its own input), so the sequence is tried again, as an agent
	// looking at the screen would, until the title says it navigated.
	waitTitle(t, func() string {
		call("desktop_click", map[string]any{"x": 512, "y": 400})
		call("desktop_key", map[string]any{"keys": "ctrl+l"})
		call("desktop_type", map[string]any{"text": "http://127.0.0.1:9222/json/version"})
		t.Logf("active window after Return: %q", activeWindow(call("desktop_key", map[string]any{"keys": "Return"})))
		for range 6 {
			if w := windows(); strings.Contains(w, "9222/json/version") {
				return w
			}
			time.Sleep(500 * time.Millisecond)
		}
		return windows()
	}, "9222/json/version")

	// The live view through the port route (TLS in front of serve).
	var lv struct{ URL string }
	if err := json.Unmarshal([]byte(text(call("desktop_live_view", nil))), &lv); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(lv.URL)
	if err != nil || !strings.HasPrefix(u.Host, "6080-") || !strings.HasSuffix(u.Host, ".sandlot.localhost") || u.Query().Get("password") == "" {
		t.Fatalf("live view URL %q: %v", lv.URL, err)
	}
	resp, err := routeClient(t, caFile).Get(lv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("noVNC")) {
		t.Errorf("live view page: %d %.200s", resp.StatusCode, body)
	}

	// The clipboard holds what was copied from the address bar.
	call("desktop_key", map[string]any{"keys": "ctrl+l"})
	call("desktop_key", map[string]any{"keys": "ctrl+c"})
	waitTitle(t, func() string { return text(call("desktop_clipboard", nil)) }, "127.0.0.1:9222/json/version")
}

// text joins a result's text contents.
func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitTitle polls get (at most 2 minutes: a loaded machine starts the
// browser slowly) until what it returns contains want.
func waitTitle(t *testing.T, get func() string, want string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if last = get(); strings.Contains(last, want) {
			return
		}
	}
	t.Fatalf("waited for %q; last: %q", want, last)
}

// routeClient reaches *.sandlot.localhost on the TLS front (127.0.0.1:443
// in the test's namespace), trusting the test CA.
func routeClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:443")
		},
	}}
}
