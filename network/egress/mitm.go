package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/secret"
)

// mitm terminates the sandbox's TLS to name with a leaf of the sandbox's
// CA, opens TLS to the real server (verified against Config.RootCAs), and
// relays HTTP/1.1 one request at a time: header rules and secret values
// go into each request, secret values come out of each response. ALPN
// offers only http/1.1, so clients do not switch to HTTP/2.
func (p *Proxy) mitm(ctx context.Context, sb *Sandbox, raw net.Conn, prefix []byte, rawUp net.Conn, name string, ev *audit.Event) {
	counted := &countConn{Conn: withPrefix(raw, prefix)}
	defer func() { ev.BytesUp, ev.BytesDown = counted.in.Load(), counted.out.Load() }()
	leaf, err := sb.CA.Leaf(name)
	if err != nil {
		ev.Reason += "; no certificate: " + err.Error()
		return
	}
	client := tls.Server(counted, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	defer client.Close()
	deadline, _ := ctx.Deadline()
	client.SetDeadline(deadline)
	if err := client.HandshakeContext(ctx); err != nil {
		ev.Reason += "; the sandbox's TLS handshake failed (does it trust its CA?): " + err.Error()
		return
	}
	up := tls.Client(rawUp, &tls.Config{
		ServerName: name,
		RootCAs:    p.cfg.RootCAs,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	defer up.Close()
	if err := up.HandshakeContext(ctx); err != nil {
		ev.Reason += "; upstream TLS failed: " + err.Error()
		writeError(client, http.StatusBadGateway, "sandlot: upstream TLS to "+name+" failed")
		return
	}
	client.SetDeadline(time.Time{})

	inject := sb.Secrets.For(name)
	scrub := sb.Secrets.Scrubber()
	headers := sb.Policy.HeadersFor(name)
	head := &io.LimitedReader{R: client, N: maxHead}
	cr := bufio.NewReader(head)
	// The server's heads are bounded too (1 MiB): an allowed host is not a
	// trusted one.
	upHead := &io.LimitedReader{R: up, N: math.MaxInt64}
	ur := bufio.NewReader(upHead)
	for {
		client.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
		head.N = maxHead
		req, err := http.ReadRequest(cr)
		if err != nil {
			if head.N <= 0 {
				writeError(client, http.StatusRequestHeaderFieldsTooLarge, "sandlot: request head too large")
			}
			return
		}
		head.N = math.MaxInt64
		client.SetReadDeadline(time.Time{})
		if host := hostOnly(req.Host); !strings.EqualFold(host, name) {
			writeError(client, http.StatusMisdirectedRequest, "sandlot: Host "+trim(host)+" does not match the TLS name "+name)
			return
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		n, err := p.injectRequest(req, inject)
		if err != nil {
			writeError(client, http.StatusBadRequest, "sandlot: "+err.Error())
			return
		}
		ev.Injected += n
		if !scrub.Empty() {
			// Plain bytes only, so the scrubber sees every value.
			req.Header.Set("Accept-Encoding", "identity")
		}
		if req.Header.Get("Expect") == "100-continue" {
			req.Header.Del("Expect")
			io.WriteString(client, "HTTP/1.1 100 Continue\r\n\r\n")
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // keeps Request.Write from adding Go's
		}
		if err := req.Write(up); err != nil {
			return
		}
		upHead.N = maxUpstreamHead
		resp, err := readResponse(ur, req, client, scrub)
		upHead.N = math.MaxInt64
		if err != nil {
			writeError(client, http.StatusBadGateway, "sandlot: no response from "+name)
			return
		}
		scrubHeaders(resp.Header, scrub)
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Write(client)
			// An upgraded connection (websocket) is spliced from here on;
			// its frames are not rewritten.
			relayUpgraded(client, cr, up, ur)
			return
		}
		if !scrub.Empty() && bodyAllowed(req, resp) {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{scrub.Reader(resp.Body), resp.Body}
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
			if req.ProtoAtLeast(1, 1) {
				resp.TransferEncoding = []string{"chunked"}
			} else {
				resp.Close = true
			}
		}
		err = resp.Write(client)
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

const maxUpstreamHead = 1 << 20

// injectRequest replaces placeholders in the request's target, headers
// and (bounded, uncompressed, sized) body. It returns the number of
// replacements.
func (p *Proxy) injectRequest(req *http.Request, r *secret.Replacer) (int, error) {
	if r.Empty() {
		return 0, nil
	}
	total := 0
	if uri, n := r.String(req.RequestURI); n > 0 {
		u, err := url.ParseRequestURI(uri)
		if err != nil {
			return 0, fmt.Errorf("bad request target after substitution")
		}
		req.URL, req.RequestURI = u, uri
		total += n
	}
	for k, vs := range req.Header {
		for i, v := range vs {
			if nv, n := r.String(v); n > 0 {
				vs[i] = nv
				total += n
			}
		}
		req.Header[k] = vs
	}
	if req.ContentLength > 0 && req.ContentLength <= p.cfg.MaxBody && req.Header.Get("Content-Encoding") == "" {
		body, err := io.ReadAll(io.LimitReader(req.Body, req.ContentLength))
		if err != nil {
			return 0, fmt.Errorf("reading the request body: %v", err)
		}
		req.Body.Close()
		nb, n := r.Bytes(body)
		total += n
		req.Body = io.NopCloser(bytes.NewReader(nb))
		req.ContentLength = int64(len(nb))
	}
	return total, nil
}

// readResponse reads the response to req, passing informational (1xx,
// except 101) responses through to the client first.
func readResponse(ur *bufio.Reader, req *http.Request, client net.Conn, scrub *secret.Replacer) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(ur, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		scrubHeaders(resp.Header, scrub)
		fmt.Fprintf(client, "HTTP/1.1 %s\r\n", resp.Status)
		resp.Header.Write(client)
		io.WriteString(client, "\r\n")
	}
}

func scrubHeaders(h http.Header, scrub *secret.Replacer) {
	if scrub.Empty() {
		return
	}
	for k, vs := range h {
		for i, v := range vs {
			vs[i], _ = scrub.String(v)
		}
		h[k] = vs
	}
}

func bodyAllowed(req *http.Request, resp *http.Response) bool {
	return req.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
}

func relayUpgraded(client net.Conn, cr *bufio.Reader, up net.Conn, ur *bufio.Reader) {
	done := make(chan struct{})
	go func() {
		io.Copy(client, ur)
		closeWrite(client)
		close(done)
	}()
	io.Copy(up, cr)
	closeWrite(up)
	<-done
}

func writeError(c net.Conn, status int, msg string) {
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	body := msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		hostport = h
	}
	return strings.TrimSuffix(hostport, ".")
}

// countConn counts the bytes of the sandbox's side of the connection.
type countConn struct {
	net.Conn
	in, out atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}
