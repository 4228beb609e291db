package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/websocket"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// A browser's shell: the same session as api.ShellProtocol's, over a
// WebSocket, because a page can open nothing else. Each text message
// carries what a line carries on the plain upgrade (ShellInput from the
// page, ShellOutput from the server); the page ends its messages with a
// newline, so the session reads them as lines.
//
// A page's WebSocket cannot send an Authorization header: the console
// offers its key as a second subprotocol (api.ShellKeyProtocolPrefix +
// key), which APIKey reads on WebSocket upgrades only and the answer
// never echoes. The key is in no URL and no cookie, so a page of another
// origin has nothing to ride on; the Origin, when the browser sends one,
// must still be the server's own.

// isWebSocket reports whether r asks for a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// wsKey returns the API key a WebSocket upgrade offers as a subprotocol.
func wsKey(r *http.Request) string {
	if !isWebSocket(r) {
		return ""
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if k, ok := strings.CutPrefix(strings.TrimSpace(p), api.ShellKeyProtocolPrefix); ok {
				return k
			}
		}
	}
	return ""
}

// sameOrigin reports whether r's Origin, if any, is the host it was sent
// to.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser's
	}
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}

// offers reports whether r offers the subprotocol p.
func offers(r *http.Request, p string) bool {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, q := range strings.Split(h, ",") {
			if strings.TrimSpace(q) == p {
				return true
			}
		}
	}
	return false
}

// shellWS serves a shell over a WebSocket.
func (s *Server) shellWS(w http.ResponseWriter, r *http.Request, size api.ShellSize) {
	if !sameOrigin(r) {
		s.writeError(w, r, fmt.Errorf("a shell's WebSocket from origin %q, not this server's: %w", r.Header.Get("Origin"), errdefs.ErrPermissionDenied))
		return
	}
	if !offers(r, api.ShellProtocol) {
		s.writeError(w, r, invalid("a shell's WebSocket must offer the subprotocol %s", api.ShellProtocol))
		return
	}
	upgraded := false
	err := s.withContext(r, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		upgraded = true
		websocket.Server{
			Handshake: func(c *websocket.Config, _ *http.Request) error {
				c.Protocol = []string{api.ShellProtocol} // never the key's
				return nil
			},
			Handler: func(ws *websocket.Conn) {
				ws.PayloadType = websocket.TextFrame
				ws.MaxPayloadBytes = maxShellLine
				_ = ws.SetDeadline(time.Time{})
				s.serveShell(ctx, r, rec, sb, ws, bufio.NewReader(ws), size)
			},
		}.ServeHTTP(hijacker{w}, r)
		return nil
	})
	if err != nil && !upgraded {
		s.writeError(w, r, err)
	}
}

// hijacker gives x/net/websocket the Hijacker it asserts, through the
// wrappers the front door put around w.
type hijacker struct{ http.ResponseWriter }

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}
