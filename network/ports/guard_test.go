package ports

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/network/policy"
)

// email is an address the guard redacts; the tests' sandbox writes it.
const email = "route.walls@exemplar.ie"

// stored is a stored secret of the tenants' (guard.Config.Known), which
// the tests' sandbox writes hex-encoded.
const stored = "vault-Pa55phrase-77"

// realGuard is the egress guard as serve hands it to the route.
type realGuard struct{ g *guard.Guard }

func (r realGuard) Body(ctx context.Context, t Target) Redactor {
	if r.g.ModeOf(ctx, t.Tenant) == guard.ModeOff {
		return nil
	}
	return r.g.File(ctx, t.Tenant)
}

func (r realGuard) Message(ctx context.Context, t Target, binary bool) Redactor {
	return r.g.Message(ctx, t.Tenant, binary)
}

func (r realGuard) Text(ctx context.Context, t Target, s string) string {
	return r.g.Text(ctx, t.Tenant, s)
}

// guardedRoute is the route in front of sandbox, a handler that plays
// what a sandbox's server may answer; the tenant "plain" has the guard
// off. It returns the route's base URL and what the sandbox was asked.
func guardedRoute(t *testing.T, sandbox http.Handler) (string, chan *http.Request) {
	t.Helper()
	asked := make(chan *http.Request, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- r.Clone(context.Background()):
		default:
		}
		sandbox.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	g, err := guard.New(guard.Config{ModeFor: func(_ context.Context, tenant string) string {
		if tenant == "plain" {
			return guard.ModeOff
		}
		return ""
	}, Known: func(context.Context, string) ([]string, error) { return []string{stored}, nil }})
	if err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, asked
}

// TestRouteGuardHTTP attacks the guard on the route with what a hostile
// server in a sandbox can answer: a plain page, a gzip body it was not
// asked for, an encoding the guard cannot read, a header, a trailer, a
// header named with a stored secret, a range of a file; and checks what a tenant with the
// guard off gets (everything as it is).
func TestRouteGuardHTTP(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	page := "contact " + email + " today\n"
	base, asked := guardedRoute(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Length", fmt.Sprint(len(page)))
			io.WriteString(w, page)
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz(page))
		case "/br":
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, page)
		case "/header":
			w.Header().Set("X-Contact", email)
			w.Header().Set("X-"+hex.EncodeToString([]byte(stored)), "1")
			w.Header().Set("Trailer", "X-Tail")
			io.WriteString(w, "ok\n")
			w.Header().Set("X-Tail", email)
		case "/range":
			io.WriteString(w, page)
		}
	}))
	get := func(tenant, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/v1/contexts/"+tenant+"/ports/8080"+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		req.Header.Set("Accept-Encoding", "gzip") // the client's wish; the route asks the sandbox for identity
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	masked := "contact " + guard.Marker(guard.TypeEmail) + " today\n"
	for _, tc := range []struct{ name, path, want string }{
		{"page", "/page", masked},
		{"gzip the route did not ask for", "/gzip", masked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get("t1", tc.path)
			if resp.StatusCode != 200 || body != tc.want || resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("%d %q (encoding %q), want %q", resp.StatusCode, body, resp.Header.Get("Content-Encoding"), tc.want)
			}
			if r := <-asked; r.Header.Get("Accept-Encoding") != "identity" {
				t.Errorf("the sandbox was asked for %q, want identity", r.Header.Get("Accept-Encoding"))
			}
		})
	}
	t.Run("an encoding the guard cannot read", func(t *testing.T) {
		resp, body := get("t1", "/br")
		<-asked
		if resp.StatusCode != 502 || strings.Contains(body, email) || !strings.Contains(body, "br") {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("headers and trailers", func(t *testing.T) {
		resp, body := get("t1", "/header")
		<-asked
		if resp.StatusCode != 200 || body != "ok\n" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if v := resp.Header.Get("X-Contact"); strings.Contains(v, email) || v == "" {
			t.Errorf("header X-Contact: %q", v)
		}
		for k := range resp.Header {
			if strings.Contains(strings.ToLower(k), hex.EncodeToString([]byte(stored))) {
				t.Errorf("a header named with a stored secret passed: %q", k)
			}
		}
		if v := resp.Trailer.Get("X-Tail"); strings.Contains(v, email) || v == "" {
			t.Errorf("trailer X-Tail: %q", v)
		}
	})
	t.Run("a range is the whole file, judged whole", func(t *testing.T) {
		resp, body := get("t1", "/range", "Range", "bytes=8-")
		if r := <-asked; r.Header.Get("Range") != "" {
			t.Errorf("the sandbox was asked for a range: %q", r.Header.Get("Range"))
		}
		if resp.StatusCode != 200 || body != masked {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("guard off", func(t *testing.T) {
		resp, body := get("plain", "/page")
		<-asked
		if resp.StatusCode != 200 || body != page || resp.ContentLength != int64(len(page)) {
			t.Fatalf("%d %q (length %d)", resp.StatusCode, body, resp.ContentLength)
		}
	})
}

// TestRouteGuardStream: a body written slowly (an event stream, a
// prompt) flows through the guard: a line goes out when it ends, a
// partial line once the sandbox is quiet, and a value split across two
// writes is still masked.
func TestRouteGuardStream(t *testing.T) {
	next := make(chan string)
	base, _ := guardedRoute(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for s := range next {
			io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
	}))
	resp, err := http.Get(base + "/v1/contexts/t1/ports/8080/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	read := func(n int) string {
		t.Helper()
		b := make([]byte, n)
		done := make(chan error, 1)
		go func() { _, err := io.ReadFull(br, b); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("nothing came through the route within 30 s (wanted %d bytes)", n)
		}
		return string(b)
	}
	next <- "data: one\n\n"
	if got := read(len("data: one\n\n")); got != "data: one\n\n" {
		t.Fatalf("first event: %q", got)
	}
	next <- "name? " // a prompt: no line end; released when the sandbox is quiet
	if got := read(len("name? ")); got != "name? " {
		t.Fatalf("prompt: %q", got)
	}
	next <- "data: " + email[:9]
	next <- email[9:] + "\n\n"
	want := "data: " + guard.Marker(guard.TypeEmail) + "\n\n"
	if got := read(len(want)); got != want {
		t.Fatalf("a value in two writes: %q, want %q", got, want)
	}
	close(next)
}

// TestRouteGuardWebSocket: a WebSocket server in a sandbox sends a text
// message in two fragments with an address across them and a ping
// between, a binary message, and a close frame with an address in its
// reason; the client gets the same messages with the findings masked
// (binary and control payloads keep their length). A compressed frame,
// a masked frame and a switch to another protocol end the exchange.
func TestRouteGuardWebSocket(t *testing.T) {
	var script func(w io.Writer)
	base, _ := guardedRoute(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Sec-Websocket-Extensions") != "" {
			t.Errorf("the sandbox was offered an extension: %q", r.Header.Get("Sec-Websocket-Extensions"))
		}
		upgrade := "websocket"
		if r.URL.Path == "/other" {
			upgrade = "h2c"
		}
		c, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(bw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n", upgrade)
		script(bw)
		bw.Flush()
	}))
	frame := func(w io.Writer, h0 byte, payload string) {
		b := []byte{h0}
		if len(payload) < 126 {
			b = append(b, byte(len(payload)))
		} else {
			b = append(b, 126)
			b = binary.BigEndian.AppendUint16(b, uint16(len(payload)))
		}
		w.Write(append(b, payload...))
	}
	binMsg := "\x00\x01bin " + email + "\xff"
	script = func(w io.Writer) {
		frame(w, 0x01, "hello "+email[:8]) // text, not final
		frame(w, 0x89, "ping")             // a ping between fragments
		frame(w, 0x80, email[8:]+" bye")   // continuation, final
		frame(w, 0x82, binMsg)             // binary
		frame(w, 0x88, "\x03\xe8"+email)   // close, reason with an address
	}
	addr := strings.TrimPrefix(base, "http://")
	status, frames := wsFrames(t, addr, "/v1/contexts/t1/ports/8080/ws")
	if !strings.Contains(status, " 101 ") {
		t.Fatalf("status %q", status)
	}
	var text, bin, ctl []string
	for _, f := range frames {
		switch f.opcode {
		case 0x1, 0x0:
			if len(bin) == 0 {
				text = append(text, f.payload)
			} else {
				bin = append(bin, f.payload)
			}
		case 0x2:
			bin = append(bin, f.payload)
		default:
			ctl = append(ctl, fmt.Sprintf("%x:%s", f.opcode, f.payload))
		}
	}
	if got := strings.Join(text, ""); got != "hello "+guard.Marker(guard.TypeEmail)+" bye" {
		t.Errorf("text message: %q (frames %q)", got, text)
	}
	if got := strings.Join(bin, ""); len(got) != len(binMsg) || strings.Contains(got, email) || !strings.HasPrefix(got, "\x00\x01bin ") {
		t.Errorf("binary message: %q", got)
	}
	if len(bin) != 1 {
		t.Errorf("a message of one frame came as %d frames: %q", len(bin), bin)
	}
	if len(ctl) != 2 || ctl[0] != "9:ping" || strings.Contains(ctl[1], email) || len(ctl[1]) != len("8:\x03\xe8"+email) {
		t.Errorf("control frames: %q", ctl)
	}
	last := frames[len(frames)-1]
	if !last.fin {
		t.Error("the last frame does not end its message")
	}

	for _, tc := range []struct {
		name, path string
		script     func(w io.Writer)
	}{
		{"a compressed frame", "/ws", func(w io.Writer) { frame(w, 0xc1, email) }},
		{"a masked frame", "/ws", func(w io.Writer) { w.Write([]byte{0x81, 0x80 | 4, 1, 2, 3, 4, 'a', 'b', 'c', 'd'}) }},
		{"a reserved opcode", "/ws", func(w io.Writer) { frame(w, 0x83, email) }},
		{"a continuation outside a message", "/ws", func(w io.Writer) { frame(w, 0x80, email) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script = tc.script
			_, frames := wsFrames(t, addr, "/v1/contexts/t1/ports/8080"+tc.path)
			if len(frames) != 0 {
				t.Fatalf("frames passed: %+v", frames)
			}
		})
	}
	t.Run("a switch to another protocol", func(t *testing.T) {
		script = func(w io.Writer) { io.WriteString(w, "raw "+email) }
		status, _ := wsFrames(t, addr, "/v1/contexts/t1/ports/8080/other")
		if !strings.Contains(status, " 502 ") {
			t.Fatalf("status %q", status)
		}
	})
}

type wsFrame struct {
	opcode  byte
	fin     bool
	payload string
}

// wsFrames opens a WebSocket through the route with a raw client (with a
// deadline) and returns the status line and the frames until the
// connection closed; the status line's body, when not 101, is read too.
func wsFrames(t *testing.T, addr, path string) (string, []wsFrame) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n", path, addr)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	if !strings.Contains(status, " 101 ") {
		return status, nil
	}
	var frames []wsFrame
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return status, frames
		}
		n := int(h[1] & 0x7f)
		if n == 126 {
			var b [2]byte
			io.ReadFull(br, b[:])
			n = int(binary.BigEndian.Uint16(b[:]))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return status, frames
		}
		frames = append(frames, wsFrame{opcode: h[0] & 0x0f, fin: h[0]&0x80 != 0, payload: string(p)})
	}
}
