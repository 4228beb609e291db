package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
)

const benchBytes = 64 << 20

// download fetches /big from url over a client whose connections go to ip
// (from inside ns when ns is set), and returns the bytes read.
func download(b *testing.B, ns, ip, url string, roots *x509.CertPool) int64 {
	dial := netns.Dialer(ns)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return dial(ctx, "tcp4", net.JoinHostPort(ip, port))
		},
		TLSClientConfig:    &tls.Config{RootCAs: roots},
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %s", resp.Status)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkThroughput downloads 64 MiB per op through the proxy's two
// paths, beside the same download without the proxy (the floor, measured
// in the same run): MB/s is the figure, and the ratio to the floor is what
// the proxy costs. Everything (client, proxy, server) shares the
// machine's cores.
func BenchmarkThroughput(b *testing.B) {
	e := newEnv(b)
	sec := secret.Secret{ID: "bench", Hosts: []string{"api.example.test"}, Value: "bench-secret-value"}
	sb := e.sandbox(b, "bench", "t1", policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")}, sec)
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AppendCertsFromPEM(sb.CA.CertPEM())
	sandboxRoots.AppendCertsFromPEM(e.world.CAPEM)
	web := nettest.Web.String()
	big := fmt.Sprintf("/big?n=%d", benchBytes)
	cases := []struct {
		name, ns, url string
		roots         *x509.CertPool
	}{
		{"direct-http", "", "http://www.example.test" + big, nil},
		{"splice-http", sb.Path, "http://www.example.test" + big, nil},
		{"direct-https", "", "https://www.example.test" + big, e.world.CA},
		{"splice-https", sb.Path, "https://www.example.test" + big, sandboxRoots},
		{"terminated-https", sb.Path, "https://api.example.test" + big, sandboxRoots},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(benchBytes)
			for i := 0; i < b.N; i++ {
				if n := download(b, c.ns, web, c.url, c.roots); n != benchBytes {
					b.Fatalf("read %d bytes", n)
				}
			}
		})
	}
}
