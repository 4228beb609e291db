package server_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestTemplatePullPrivateAddress: a tenant's pull through /v1/templates
// names a registry on the daemon's loopback (started here, holding an
// image), by address and by a name that resolves to it, and the metadata,
// private and unspecified addresses. A daemon that dials them is a door
// into the host's network (SSRF): every pull is a 403 that says why,
// checked when the connection is made, and nothing is recorded.
func TestTemplatePullPrivateAddress(t *testing.T) {
	ctx := context.Background()
	cat, _ := templateCatalog(t, nil)
	e := newEnv(t, func(c *server.Config) { c.Templates = cat })
	reg := templatestest.Registry(t) // 127.0.0.1:port
	templatestest.Push(t, reg+"/a/app:1", templatestest.Image(t, "A"))
	_, port, _ := net.SplitHostPort(reg)

	for i, ref := range []string{
		reg + "/a/app:1",
		"localhost:" + port + "/a/app:1",
		"[::1]:" + port + "/a/app:1",
		"169.254.169.254/a/app:1",
		"10.0.0.1:" + port + "/a/app:1",
		"0.0.0.0:" + port + "/a/app:1",
	} {
		w := e.do(t, req{method: "POST", path: "/v1/templates", key: e.KeyA,
			body: api.TemplateRequest{Name: "app" + string(rune('a'+i)), Ref: ref}})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "not on the public internet") {
			t.Errorf("pull %s: %d %s, want 403 naming the refusal", ref, w.Code, w.Body)
		}
	}
	if l, err := cat.List(ctx, "tenant-a"); err != nil || len(l) != 1 { // the built-in default only
		t.Errorf("templates after refused pulls: %v %v", l, err)
	}
}
