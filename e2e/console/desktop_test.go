package console_test

import (
	"bytes"
	"crypto/tls"
	"image"
	"image/png"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/network/nettest"
)

// TestConsoleDesktop: a desktop session's page frames its live view from
// the ports domain (noVNC connected: the remote desktop's thousands of
// colours in the frame), and the console's CSP refuses a frame of the
// ports route's path form, which would put the sandbox's page on the
// console's own origin beside the key.
func TestConsoleDesktop(t *testing.T) {
	nettest.Require(t)
	debiantest.Image(t, desktop.ImageConfig(), desktop.Template)
	d := serveWith(t, "--runtime", "crun", "--network", "--network-spares", "0", "--network-upstream", "127.0.0.1:9",
		// The tenant's guard enforces (the default): noVNC's scripts pass
		// the ports route's guard whole.
		"--desktop-stream-wait", "3m")
	tlsFront(t, d.url)
	t.Cleanup(func() { d.status(t, d.key, "DELETE", "/v1/conversations/desk") })
	var shot struct{ Width int }
	d.api(t, d.key, "POST", "/v1/tools/desktop_screenshot", map[string]any{"conversationId": "desk", "args": map[string]any{}}, &shot)
	if shot.Width == 0 {
		t.Fatal("no desktop session")
	}

	p := newPage(t, t.TempDir(), chromedp.Flag("ignore-certificate-errors", true))
	p.run("open /ui", chromedp.Navigate(d.url+"/ui"))
	p.typeInto("textbox", "API key", d.key)
	p.click("button", "Sign in")
	p.byName("table", "Contexts")
	p.run("the session's page", chromedp.Navigate(d.url+"/ui#/c/desk/"+url.PathEscape("desktop:main")))
	p.click("button", "Watch the desktop")
	frame := p.byName("Iframe", "Desktop live view")
	var src string
	p.run("the frame's URL", chromedp.AttributeValue(frame, "src", &src, nil, chromedp.ByQuery))
	if u, err := url.Parse(src); err != nil || u.Scheme != "https" || u.Port() != "" || len(u.Hostname()) < 20 {
		t.Fatalf("the live view's URL: %q", src)
	}
	// The remote desktop drawn in the frame: noVNC's own page has a few
	// hundred colours, a desktop thousands.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var rect struct{ X, Y, W, H float64 }
		p.eval(`(() => { const r = document.querySelector('iframe.liveview').getBoundingClientRect();
			window.scrollTo(0, 0); return {X: r.x, Y: r.y + window.scrollY, W: r.width, H: r.height}; })()`, &rect)
		var buf []byte
		p.run("screenshot", chromedp.FullScreenshot(&buf, 100))
		n := colours(t, buf, image.Rect(int(rect.X), int(rect.Y), int(rect.X+rect.W), int(rect.Y+rect.H)))
		if n > 1000 {
			t.Logf("the live view shows %d colours", n)
			break
		}
		if time.Now().After(deadline) {
			p.shot("desktop-failed")
			t.Fatalf("the live view never showed the desktop (%d colours)", n)
		}
		time.Sleep(time.Second)
	}
	p.shot("desktop")

	// The path form of the ports route is the console's origin: the CSP
	// refuses to frame it.
	var blocked string
	p.run("frame the console's origin", chromedp.Evaluate(`new Promise((resolve) => {
		document.addEventListener('securitypolicyviolation', (e) => resolve(e.effectiveDirective + ' ' + e.blockedURI), {once: true});
		const f = document.createElement('iframe');
		f.src = location.origin + '/v1/contexts/x/ports/6080/vnc.html';
		document.body.append(f);
		setTimeout(() => resolve('loaded'), 5000);
	})`, &blocked, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if len(blocked) < 9 || blocked[:9] != "frame-src" {
		t.Fatalf("a frame of the console's origin was not refused: %q", blocked)
	}
}

// colours counts the distinct colours of a PNG within r.
func colours(t *testing.T, b []byte, r image.Rectangle) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r = r.Intersect(img.Bounds())
	seen := map[[3]uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			seen[[3]uint32{cr, cg, cb}] = true
		}
	}
	return len(seen)
}

// tlsFront terminates TLS for *.sandlot.localhost on 127.0.0.1:443 (in the
// package's network namespace) and forwards to serve, Host kept: the
// operator's TLS in front of the ports route.
func tlsFront(t *testing.T, target string) {
	t.Helper()
	cert, _ := nettest.ServerCert(t, "*.sandlot.localhost")
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host
	}}
	l, err := tls.Listen("tcp4", "127.0.0.1:443", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}
