package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sandlot/sandlot/internal/testenv"
)

// page is one browser tab of a test.
type page struct {
	t     *testing.T
	ctx   context.Context
	shots string // where screenshots go
	seq   int    // marks of byName
}

// newPage starts Debian's chromium headless at 1280x800 (with extra
// options) and returns a tab; downloads go to dl.
//
// Chromium's start is bounded by startBound, not chromedp's 20 s: a new
// machine has taken longer (CI saw two starts pass 20 s; here they take
// 1-3 s, a new machine compiling a cluster beside them). When it does not
// come up, the failure shows what Chromium printed and the host's load.
func newPage(t *testing.T, dl string, extra ...chromedp.ExecAllocatorOption) *page {
	t.Helper()
	bin := testenv.RequireBinary(t, "chromium")
	out := &testenv.Buffer{Max: 64 << 10} // chromedp writes it until Chromium ends
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WSURLReadTimeout(startBound), chromedp.CombinedOutput(out))
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelC(); cancelA() })
	began := time.Now()
	if err := chromedp.Run(ctx, browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(dl)); err != nil {
		load, _ := os.ReadFile("/proc/loadavg")
		t.Fatalf("start chromium: %v after %v (load %s); it printed:\n%s",
			err, time.Since(began).Round(time.Millisecond), strings.TrimSpace(string(load)), out.String())
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Logf("chromium took %v to start", d.Round(time.Millisecond))
	}
	shots := os.Getenv("CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	return &page{t: t, ctx: ctx, shots: shots}
}

// startBound bounds Chromium's start, to its DevTools address.
const startBound = 2 * time.Minute

// run runs actions with a bound.
func (p *page) run(what string, actions ...chromedp.Action) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// byName finds the element of role with the accessible name, as a
// screen reader (and an outside test) finds it, waiting for it up to a
// bound, and returns a CSS selector of it (an attribute the test puts on
// it, since chromedp's queries take selectors).
func (p *page) byName(role, name string) string {
	p.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p.seq++
		mark := fmt.Sprint(p.seq)
		found := false
		err := chromedp.Run(p.ctx, chromedp.ActionFunc(func(ctx context.Context) error {
			// The document as a remote object: DOM.getDocument would
			// renumber the nodes chromedp tracks.
			doc, _, err := runtime.Evaluate("document").Do(ctx)
			if err != nil {
				return err
			}
			nodes, err := accessibility.QueryAXTree().WithObjectID(doc.ObjectID).WithAccessibleName(name).WithRole(role).Do(ctx)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				if n.Ignored || n.BackendDOMNodeID == 0 {
					continue
				}
				obj, err := dom.ResolveNode().WithBackendNodeID(n.BackendDOMNodeID).Do(ctx)
				if err != nil {
					return err
				}
				arg := []*runtime.CallArgument{{Value: []byte(`"` + mark + `"`)}}
				if _, _, err := runtime.CallFunctionOn("function(m) { this.setAttribute('data-e2e', m) }").
					WithObjectID(obj.ObjectID).WithArguments(arg).Do(ctx); err != nil {
					return err
				}
				found = true
				return nil
			}
			return nil
		}))
		if err == nil && found {
			return `[data-e2e="` + mark + `"]`
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s named %q (%v)", role, name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *page) click(role, name string) {
	p.t.Helper()
	p.run("click "+role+" "+name, chromedp.Click(p.byName(role, name), chromedp.ByQuery))
}

func (p *page) typeInto(role, name, text string) {
	p.t.Helper()
	p.run("type into "+name, chromedp.SendKeys(p.byName(role, name), text, chromedp.ByQuery))
}

func (p *page) setValue(role, name, text string) {
	p.t.Helper()
	p.run("set "+name, chromedp.SetValue(p.byName(role, name), text, chromedp.ByQuery))
}

// text returns the text of the element of role and name.
func (p *page) text(role, name string) string {
	p.t.Helper()
	var s string
	p.run("read "+name, chromedp.Text(p.byName(role, name), &s, chromedp.ByQuery))
	return s
}

// eval evaluates a JavaScript expression into out.
func (p *page) eval(expr string, out any) {
	p.t.Helper()
	p.run("eval "+expr, chromedp.Evaluate(expr, out))
}

// waitText waits until the element's text satisfies ok, up to a bound,
// and returns it.
func (p *page) waitText(role, name, what string, ok func(string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s := p.text(role, name)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s %q never showed %s; it shows:\n%s", role, name, what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shot saves a full-page screenshot as name.png.
func (p *page) shot(name string) {
	p.t.Helper()
	var buf []byte
	p.run("screenshot "+name, chromedp.FullScreenshot(&buf, 100)) // 100: PNG
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// viewport sets the page's size (a phone's width, or back).
func (p *page) viewport(w, h int64, mobile bool) {
	p.t.Helper()
	p.run(fmt.Sprintf("viewport %dx%d", w, h), emulation.SetDeviceMetricsOverride(w, h, 1, mobile))
}

// waitJS waits until a JavaScript expression is true, up to a bound.
func (p *page) waitJS(what, expr string) {
	p.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var ok bool
		p.eval(expr, &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("never %s (%s)", what, expr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}
