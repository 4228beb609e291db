package ports

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/network/policy"
)

// BenchmarkRouteDownload is a download of 8 MiB through the route, as
// text (log lines, 1% with an address) and as a binary format (a zip
// signature before random-looking bytes), with the guard and raw (the
// tenant's guard mode off), in the same run: the ratio is the guard's
// cost on the route.
func BenchmarkRouteDownload(b *testing.B) {
	var text bytes.Buffer
	for i := 0; text.Len() < 8<<20; i++ {
		if i%100 == 0 {
			text.WriteString("GET /login user=" + email + " 200\n")
		} else {
			text.WriteString("GET /static/app.js HTTP/1.1 200 18342 0.004 Mozilla/5.0 (X11; Linux x86_64)\n")
		}
	}
	bin := make([]byte, 8<<20)
	copy(bin, "PK\x03\x04")
	for i := 4; i < len(bin); i++ {
		bin[i] = byte(i*2654435761>>13) | 0x80 // high bytes: no text runs
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/bin") {
			w.Write(bin)
			return
		}
		w.Write(text.Bytes())
	}))
	b.Cleanup(up.Close)
	g, err := guard.New(guard.Config{ModeFor: func(_ context.Context, tenant string) string {
		if tenant == "raw" {
			return guard.ModeOff
		}
		return ""
	}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{
		Lookup: func(_ context.Context, id string) (Target, error) {
			return Target{Addr: netip.MustParseAddr("127.0.0.1"), Ingress: policy.Ingress{Public: true}, Tenant: id}, nil
		},
		Authorize: func(context.Context, string, string) error { return nil },
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, up.Listener.Addr().String())
		},
		Guard: realGuard{g},
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	for _, tc := range []struct{ name, tenant, path string }{
		{"text/guarded", "t1", "/text"}, {"text/raw", "raw", "/text"},
		{"binary/guarded", "t1", "/bin"}, {"binary/raw", "raw", "/bin"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(8 << 20)
			for b.Loop() {
				resp, err := http.Get(srv.URL + "/v1/contexts/" + tc.tenant + "/ports/8080" + tc.path)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
