package nettest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/network/netns"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// The fake internet's fixed points. The public ones are documentation
// ranges (not forbidden); Private and Metadata are forbidden ranges the
// world nevertheless routes, so only the rules keep sandboxes out.
var (
	Uplink   = netip.MustParseAddr("198.51.100.1") // the host's side
	WorldGW  = netip.MustParseAddr("198.51.100.2")
	DNSAddr  = netip.MustParseAddrPort("198.51.100.53:53")
	Web      = netip.MustParseAddr("203.0.113.10") // HTTP :80 :8080, HTTPS :443, raw echo :7, UDP echo :9
	Web2     = netip.MustParseAddr("203.0.113.20") // HTTP :80, raw echo :7 (for address rules)
	Private  = netip.MustParseAddr("10.9.9.9")     // HTTP :80, UDP echo :9
	Metadata = netip.MustParseAddr("169.254.169.254")
)

// Zone is the world's DNS.
var Zone = map[string][]string{
	"www.example.test":     {"203.0.113.10"},
	"api.example.test":     {"203.0.113.10"},
	"blocked.example.test": {"203.0.113.10"},
	"example.test":         {"203.0.113.10"},
	"api.test":             {"203.0.113.10"},
	"other.test":           {"203.0.113.10"},
	"web2.test":            {"203.0.113.20"},
	"pkgs.test":            {"203.0.113.20"}, // Serve's handlers on :8080 (package indexes)
	"rebind.test":          {"10.9.9.9"},
	"meta.test":            {"169.254.169.254"},
}

// TLSNames are the names the world's HTTPS server has a certificate for.
var TLSNames = []string{"*.example.test", "example.test", "api.test", "other.test"}

// Request is what a world server saw of one request.
type Request struct {
	Server string // "web:80", "web:443", ...
	Host   string
	Path   string
	Query  string
	Auth   string // the Authorization header
	Header http.Header
	Body   string
}

// World is a fake internet in its own network namespace, routed from the
// test's host namespace.
type World struct {
	NS    string
	DNS   *DNS
	CA    *x509.CertPool
	CAPEM []byte

	mu   sync.Mutex
	seen []Request
}

// Seen returns the requests the world's HTTP servers received.
func (w *World) Seen() []Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Request(nil), w.seen...)
}

// Last returns the last request a server received (zero if none).
func (w *World) Last(server string) Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.seen) - 1; i >= 0; i-- {
		if w.seen[i].Server == server {
			return w.seen[i]
		}
	}
	return Request{}
}

// NewWorld builds the world and a default route to it from the test's
// host namespace (the one nettest.Main made). Everything goes at cleanup.
func NewWorld(t testing.TB) *World {
	t.Helper()
	Require(t)
	w := &World{NS: filepath.Join(t.TempDir(), "world"), DNS: &DNS{Zone: Zone}}
	if err := netns.New(w.NS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Remove(w.NS) })
	nsh, err := vnetns.GetFromPath(w.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	la := netlink.NewLinkAttrs()
	la.Name = "world0"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(nsh)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName("world0"); err == nil {
			netlink.LinkDel(l)
		}
	})
	host, _ := netlink.LinkByName("world0")
	must(t, netlink.AddrAdd(host, addr("198.51.100.1/24")))
	must(t, netlink.LinkSetUp(host))
	must(t, netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Gw: net.IP(WorldGW.AsSlice())}))

	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, _ := h.LinkByName("lo")
	must(t, h.LinkSetUp(lo))
	for _, a := range []string{"198.51.100.53/32", "203.0.113.10/32", "203.0.113.20/32", "10.9.9.9/32", "169.254.169.254/32"} {
		must(t, h.AddrAdd(lo, addr(a)))
	}
	eth, _ := h.LinkByName("eth0")
	must(t, h.AddrAdd(eth, addr("198.51.100.2/24")))
	must(t, h.LinkSetUp(eth))

	w.serveDNS(t)
	cert := w.makeCA(t)
	w.serveHTTP(t, "web:80", "203.0.113.10:80", nil)
	w.serveHTTP(t, "web:8080", "203.0.113.10:8080", nil)
	w.serveHTTP(t, "web:443", "203.0.113.10:443", cert)
	w.serveHTTP(t, "web2:80", "203.0.113.20:80", nil)
	w.serveHTTP(t, "private:80", "10.9.9.9:80", nil)
	w.serveHTTP(t, "metadata:80", "169.254.169.254:80", nil)
	w.serveEcho(t, "203.0.113.10:7")
	w.serveEcho(t, "203.0.113.20:7")
	w.serveUDPEcho(t, "203.0.113.10:9")
	w.serveUDPEcho(t, "10.9.9.9:9")
	return w
}

func (w *World) listen(t testing.TB, address string) net.Listener {
	t.Helper()
	l, err := netns.Listen(context.Background(), w.NS, "tcp4", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func (w *World) serveDNS(t testing.TB) {
	t.Helper()
	pc, err := netns.ListenPacket(context.Background(), w.NS, "udp4", DNSAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	w.DNS.Serve(t, pc, w.listen(t, DNSAddr.String()))
}

// serveHTTP runs the echo handler: it records the request and answers
// with what it saw as JSON, the Authorization header also echoed in the
// X-Echo-Auth response header. /big?n=N answers N bytes.
func (w *World) serveHTTP(t testing.TB, name, address string, cert *tls.Certificate) {
	t.Helper()
	l := w.listen(t, address)
	if cert != nil {
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/sink", func(rw http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		json.NewEncoder(rw).Encode(map[string]int64{"bytes": n})
	})
	mux.HandleFunc("/big", func(rw http.ResponseWriter, r *http.Request) {
		var n int64
		json.Unmarshal([]byte(r.URL.Query().Get("n")), &n)
		rw.Header().Set("Content-Length", jsonInt(n))
		chunk := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(chunk)))
			if _, err := rw.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		req := Request{Server: name, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Header: r.Header.Clone(), Body: string(body)}
		w.mu.Lock()
		w.seen = append(w.seen, req)
		w.mu.Unlock()
		rw.Header().Set("X-Echo-Auth", req.Auth)
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(req)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// Serve runs h on address inside the world (e.g. "203.0.113.20:8080",
// which pkgs.test names) until the test ends: a server a test shapes
// itself, such as a package index.
func (w *World) Serve(t testing.TB, address string, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(w.listen(t, address))
	t.Cleanup(func() { srv.Close() })
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// serveEcho echoes every byte back: a protocol that is neither TLS nor HTTP.
func (w *World) serveEcho(t testing.TB, address string) {
	t.Helper()
	l := w.listen(t, address)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
}

func (w *World) serveUDPEcho(t testing.TB, address string) {
	t.Helper()
	pc, err := netns.ListenPacket(context.Background(), w.NS, "udp4", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
}

// makeCA creates the world's CA (what the host trusts for the real
// servers) and the HTTPS server's certificate.
func (w *World) makeCA(t testing.TB) *tls.Certificate {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "world test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	w.CA = x509.NewCertPool()
	w.CA.AddCert(caCert)
	w.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "world"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: TLSNames, IPAddresses: []net.IP{net.IP(Web.AsSlice())},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func addr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}
