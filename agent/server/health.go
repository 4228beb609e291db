package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/netutil"
)

// HealthAddr is where an agent that is its sandbox's PID 1 answers the
// code interpreter's health check, as E2B's sandboxes do on port 49999
// (http://localhost:49999/health, 200): programs and E2B's own tests look
// there to see that the interpreter is up. sandlot's kernels are the
// agent's, so the agent answering is the interpreter being up.
const HealthAddr = "0.0.0.0:49999"

// healthDeadline bounds one health connection: request in, answer out.
const healthDeadline = 5 * time.Second

// serveHealth answers GET /health with 200 on addr until ctx ends. Nothing
// else is served: the listener is reachable by everything in the sandbox,
// so connections are few (8 at once), short and small. The answer is one
// fixed HTTP/1.1 response per connection, written here rather than by
// net/http, which the agent binary keeps out of its dependencies (see
// cmd/sandlot-agent TestDeps).
func serveHealth(ctx context.Context, addr string, log *slog.Logger) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// The port is taken or the sandbox has no network stack: the
		// health check is a courtesy, the agent serves without it.
		log.Info("no health listener", "addr", addr, "err", err)
		return
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	lim := netutil.LimitListener(ln, 8)
	for {
		c, err := lim.Accept()
		if err != nil {
			return
		}
		go answerHealth(c)
	}
}

// answerHealth reads one request head (at most 8 KiB) and answers it.
func answerHealth(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(healthDeadline))
	r := textproto.NewReader(bufio.NewReader(io.LimitReader(c, 8<<10)))
	line, err := r.ReadLine()
	if err != nil {
		return
	}
	if _, err := r.ReadMIMEHeader(); err != nil {
		_, _ = io.WriteString(c, healthResponse(400, "Bad Request", ""))
		return
	}
	method, rest, _ := strings.Cut(line, " ")
	target, _, _ := strings.Cut(rest, " ")
	path, _, _ := strings.Cut(target, "?")
	switch {
	case path != "/health":
		_, _ = io.WriteString(c, healthResponse(404, "Not Found", ""))
	case method != "GET" && method != "HEAD":
		_, _ = io.WriteString(c, healthResponse(405, "Method Not Allowed", ""))
	case method == "HEAD":
		ok := healthResponse(200, "OK", `"OK"`)
		_, _ = io.WriteString(c, ok[:len(ok)-len(`"OK"`)])
	default:
		_, _ = io.WriteString(c, healthResponse(200, "OK", `"OK"`))
	}
}

// healthResponse is a whole HTTP/1.1 response that closes its connection.
func healthResponse(code int, reason, body string) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(code) + " " + reason)
	b.WriteString("\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ")
	b.WriteString(strconv.Itoa(len(body)))
	b.WriteString("\r\n\r\n")
	b.WriteString(body)
	return b.String()
}
