package templates_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestCatalogPullRedirect: the operator allows a tenant's pulls to reach
// the registry at 127.0.0.2, which redirects blob downloads to
// localhost (a name; go-containerregistry's own redirect check lets names
// through), which is 127.0.0.1, holding the same content. Neither the
// redirect nor the name is a way around the refusal: every connection is
// checked on the address it dials, so the tenant's pull is
// permission_denied, while the operator's public pull follows the
// redirect.
func TestCatalogPullRedirect(t *testing.T) {
	ctx := context.Background()
	c, _ := newCatalogWith(t, func(c *templates.Config) {
		c.PullAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
		c.Pull.Insecure = true // plain HTTP to 127.0.0.2
	})
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	other := httptest.NewServer(h) // 127.0.0.1
	t.Cleanup(other.Close)
	_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	front := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			http.Redirect(w, r, "http://localhost:"+port+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		h.ServeHTTP(w, r)
	})}}
	front.Start()
	t.Cleanup(front.Close)
	reg := strings.TrimPrefix(front.URL, "http://")
	templatestest.Push(t, strings.TrimPrefix(other.URL, "http://")+"/r/app:1", templatestest.Image(t, "redirected"))

	_, err = c.Pull(ctx, "A", reg+"/r/app:1", templates.Spec{Name: "app"}, nil)
	if !errors.Is(err, errdefs.ErrPermissionDenied) || !strings.Contains(err.Error(), "127.0.0.1 is not on the public internet") {
		t.Fatalf("a tenant's pull redirected to localhost: %v, want permission_denied naming it", err)
	}
	if _, err := c.Resolve(ctx, "A", "app"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a refused pull left a record: %v", err)
	}
	if _, err := c.Pull(ctx, "", reg+"/r/app:1", templates.Spec{Name: "ops"}, nil); err != nil {
		t.Errorf("the operator's pull through the redirect: %v", err)
	}
}
