package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleKeys: the contexts page shows the usage against quotas; the
// "API keys" page lists the tenant's keys by prefix
// (never another tenant's, never a key), makes one and shows it once,
// and revokes one: the page's own key signs the page out and is refused
// by the API at once; the last key is refused with the server's reason.
func TestConsoleKeys(t *testing.T) {
	d := serve(t)
	p := newPage(t, t.TempDir())
	p.run("open /ui", chromedp.Navigate(d.url+"/ui"))
	p.typeInto("textbox", "API key", d.key)
	p.click("button", "Sign in")
	// The usage panel of the contexts page: the tenant's quotas.
	p.waitText("table", "Usage against quotas", "the quotas", func(s string) bool {
		return strings.Contains(s, "Active contexts") && strings.Contains(s, "Requests in flight")
	})
	p.byName("meter", "Active contexts: 0 of 10")
	p.click("link", "API keys")
	first := d.key[:10]
	p.waitText("table", "API keys", "the key of the page", contains(first))
	if s := p.text("table", "API keys"); strings.Contains(s, d.otherKey[:10]) || strings.Contains(s, d.key) {
		t.Fatalf("the keys table shows another tenant's key or a whole key:\n%s", s)
	}

	p.typeInto("textbox", "Key name", "browser key")
	p.click("button", "Create key")
	var made string
	p.run("read the new key", chromedp.Value(p.byName("textbox", "New API key"), &made, chromedp.ByQuery))
	if !strings.HasPrefix(made, "e2b_") || len(made) != 44 {
		t.Fatalf("the new key: %q", made)
	}
	if code := d.status(t, made, "GET", "/v1/tenant"); code != http.StatusOK {
		t.Fatalf("the new key: %d", code)
	}
	p.waitText("table", "API keys", "the new key's row", contains("browser key"))
	if s := p.text("table", "API keys"); strings.Contains(s, made) {
		t.Fatalf("the table shows the whole key:\n%s", s)
	}
	p.shot("keys")

	// Revoking the page's own key: the page signs out, the API refuses it.
	own := "unnamed (" + first + "…)"
	p.click("button", "Revoke "+own)
	p.click("button", "Confirm: revoke "+own+", the key of this page")
	p.byName("button", "Sign in")
	if code := d.status(t, d.key, "GET", "/v1/tenant"); code != http.StatusUnauthorized {
		t.Fatalf("the revoked key: %d", code)
	}

	// The last key stays, and the page says why.
	p.typeInto("textbox", "API key", made)
	p.click("button", "Sign in")
	p.click("link", "API keys")
	p.waitText("table", "API keys", "one key left", func(s string) bool { return strings.Contains(s, "browser key") && !strings.Contains(s, first) })
	last := "browser key (" + made[:10] + "…)"
	p.click("button", "Revoke "+last)
	p.click("button", "Confirm: revoke "+last+", the key of this page")
	p.waitJS("the refusal shown", `[...document.querySelectorAll('[role=alert]')].some(a => a.textContent.includes("last key"))`)
	if code := d.status(t, made, "GET", "/v1/tenant"); code != http.StatusOK {
		t.Fatalf("the last key after a refused revocation: %d", code)
	}
}

// status calls /v1 with key and returns the status code.
func (d *daemon) status(t *testing.T, key, method, path string) int {
	t.Helper()
	req, _ := http.NewRequest(method, d.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
