package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/internal/logkey"
)

// A forward proxy serves sandboxes that are given the proxy's address
// (HTTP_PROXY, HTTPS_PROXY) rather than redirected to it by the kernel:
// sandbox pods on Kubernetes. Such a connection says where it goes (a
// CONNECT target or an absolute URL) and whose it is (Proxy-Authorization),
// and neither is believed as said:
//
//   - the credential is the sandbox's id and a MAC of it under a key only
//     the daemons hold (Credential), so a pod cannot name another sandbox;
//   - the connection's source address must be one of the addresses the
//     cluster gives that sandbox's pod (ForwardConfig.Identify), so a
//     credential that leaked out of its pod is of no use from another;
//   - the destination is then judged exactly as a redirected connection's
//     (Proxy.serve): the CONNECT target only names it where the first
//     bytes (SNI, Host) do not, and a name is resolved by the proxy.

// ForwardConfig configures Proxy.ServeForward.
type ForwardConfig struct {
	// Key authenticates credentials (Credential); at least 16 bytes, the
	// same on every daemon that serves the sandboxes.
	Key []byte
	// Identify returns the sandbox with that id as it is now, and the
	// addresses its pod has; an error refuses the connection (an unknown
	// or ended sandbox). It is called for every connection.
	Identify func(ctx context.Context, id string) (*Sandbox, []netip.Addr, error)
	// HeadTimeout bounds the wait for the request head (default 10s).
	HeadTimeout time.Duration
	// MaxPending bounds the connections whose head is still being read or
	// identified (default 256): they hold a descriptor and a goroutine
	// for up to HeadTimeout before the limits of an identified sandbox
	// apply, so a pod that opens connections and sends nothing is closed
	// at once beyond it instead of exhausting the daemon's descriptors.
	MaxPending int
}

// credentialDomain separates these MACs from any other use of the key.
const credentialDomain = "sandlot egress proxy credential\x00"

// Credential is the proxy password of sandbox id under key.
func Credential(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(credentialDomain + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ProxyURL is the proxy URL a sandbox is given: the credential is its
// user and password, which clients send as Proxy-Authorization.
func ProxyURL(key []byte, id, proxyAddr string) string {
	return "http://" + id + ":" + Credential(key, id) + "@" + proxyAddr
}

// errIdentity is a connection whose credential does not hold.
var errIdentity = errors.New("no valid sandbox credential")

// ServeForward accepts forward-proxy connections on l until l is closed.
func (p *Proxy) ServeForward(l net.Listener, cfg ForwardConfig) error {
	if len(cfg.Key) < 16 || cfg.Identify == nil {
		return errors.New("egress: a forward proxy needs a key of 16 bytes or more and Identify")
	}
	if cfg.HeadTimeout == 0 {
		cfg.HeadTimeout = 10 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 256
	}
	pending := make(chan struct{}, cfg.MaxPending)
	var wait time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isClosed() {
				return nil
			}
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			p.log.Warn("egress: accept failed; trying again", logkey.Err, err, "in", wait)
			time.Sleep(wait)
			continue
		}
		wait = 0
		select {
		case pending <- struct{}{}:
		default:
			c.Close() // too many unidentified connections already
			continue
		}
		var once sync.Once
		go p.forward(c, cfg, func() { once.Do(func() { <-pending }) })
	}
}

// forward serves one connection; identified is called once its head is
// read and judged (and at the latest when it ends), which frees its place
// among the pending ones.
func (p *Proxy) forward(c net.Conn, cfg ForwardConfig, identified func()) {
	defer c.Close()
	defer identified()
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return
	}
	src := ta.AddrPort().Addr().Unmap()
	br := bufio.NewReaderSize(c, peekBuffer)
	c.SetReadDeadline(time.Now().Add(cfg.HeadTimeout))
	req, err := readHead(br)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		answer(c, http.StatusBadRequest, "sandlot: not a proxy request: "+err.Error(), "")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	sb, err := p.identify(ctx, cfg, src, req.Header.Get("Proxy-Authorization"))
	cancel()
	identified()
	if err != nil {
		p.log.Debug("egress: forward proxy refused a connection", "src", src.String(), logkey.Err, err)
		answer(c, http.StatusProxyAuthRequired, "sandlot: "+err.Error(), `Basic realm="sandlot"`)
		return
	}
	// The registry holds what the proxy last learned of the sandbox at
	// src, so that Recheck and the decision's re-check (allowedNow) see it
	// as for a redirected connection.
	p.reg.Register(src, sb)

	host, port, err := target(req)
	if err != nil {
		answer(c, http.StatusBadRequest, "sandlot: "+err.Error(), "")
		return
	}
	dst := netip.AddrPortFrom(netip.Addr{}, port)
	hint := host
	if a, err := netip.ParseAddr(host); err == nil {
		dst, hint = netip.AddrPortFrom(a.Unmap(), port), ""
	}
	if req.Method == http.MethodConnect {
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			return
		}
		c.SetWriteDeadline(time.Time{})
		p.serve(c, br, src, sb, dst, hint)
		return
	}
	// A plain request in absolute form goes upstream in origin form,
	// without the proxy's headers (the credential stays here), and as the
	// connection's only request: a second one would pass unread.
	head := originHead(req)
	rest, _ := br.Peek(br.Buffered())
	pc := withPrefix(c, append(head, rest...))
	p.serve(pc, bufio.NewReaderSize(pc, peekBuffer), src, sb, dst, hint)
}

// identify checks a Proxy-Authorization value and the source address.
func (p *Proxy) identify(ctx context.Context, cfg ForwardConfig, src netip.Addr, auth string) (*Sandbox, error) {
	scheme, enc, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return nil, errIdentity
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return nil, errIdentity
	}
	id, pass, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" || !hmac.Equal([]byte(pass), []byte(Credential(cfg.Key, id))) {
		return nil, errIdentity
	}
	sb, addrs, err := cfg.Identify(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	for _, a := range addrs {
		if a.Unmap() == src {
			return sb, nil
		}
	}
	return nil, fmt.Errorf("sandbox %s: the connection does not come from its pod (%s)", id, src)
}

// readHead reads one request head of at most maxHead bytes.
func readHead(br *bufio.Reader) (*http.Request, error) {
	for n := 1; ; n = br.Buffered() + 1 {
		if _, err := br.Peek(n); err != nil {
			return nil, err
		}
		b, _ := br.Peek(br.Buffered())
		if bytes.Contains(b, []byte("\r\n\r\n")) {
			break
		}
		if len(b) >= maxHead {
			return nil, errors.New("request head too long")
		}
	}
	return http.ReadRequest(br)
}

// target is where a proxy request goes: the CONNECT authority, or the
// absolute URL's host (port 80 by default). Only http URLs are carried
// in plain form; https goes through CONNECT.
func target(req *http.Request) (string, uint16, error) {
	authority := req.Host
	def := ""
	if req.Method != http.MethodConnect {
		if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
			return "", 0, errors.New("a plain request needs an absolute http:// URL (use CONNECT for anything else)")
		}
		authority, def = req.URL.Host, "80"
	}
	host, ps, err := net.SplitHostPort(authority)
	if err != nil {
		if def == "" {
			return "", 0, fmt.Errorf("CONNECT target %q: want host:port", trim(authority))
		}
		host, ps = strings.Trim(authority, "[]"), def
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 || host == "" {
		return "", 0, fmt.Errorf("target %q: bad host or port", trim(authority))
	}
	return host, uint16(port), nil
}

// originHead writes req's head in origin form for the server, without the
// headers meant for the proxy, and closing after one response.
func originHead(req *http.Request) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.URL.Host)
	h := req.Header.Clone()
	for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive", "Host"} {
		h.Del(k)
	}
	if req.ContentLength > 0 && h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
	}
	if len(req.TransferEncoding) > 0 {
		h.Set("Transfer-Encoding", strings.Join(req.TransferEncoding, ", "))
	}
	h.Set("Connection", "close")
	h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// answer writes a short proxy answer.
func answer(c net.Conn, code int, msg, authenticate string) {
	body := msg + "\n"
	extra := ""
	if authenticate != "" {
		extra = "Proxy-Authenticate: " + authenticate + "\r\n"
	}
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), extra, len(body), body)
}
