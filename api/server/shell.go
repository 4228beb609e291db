package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Bounds of a shell session.
const (
	// maxShellLine bounds one line from the client (a paste arrives as
	// one); more ends the session.
	maxShellLine = 1 << 20
	// maxShellBacklog bounds the terminal output waiting for a slow
	// client. Output comes on the sandbox's connection, which must never
	// wait for a client: past the bound the session ends.
	maxShellBacklog = 4 << 20
	// shellTouch is how often a session keeps its context alive: a shell
	// open for longer than the TTL is use.
	shellTouch = time.Minute
)

// shell serves GET .../shell: an interactive bash on a terminal in the
// context, over a connection upgraded to api.ShellProtocol. Everything
// before the upgrade (the key, the context, a sandbox being made) answers
// as any route does; after it, lines of JSON carry keystrokes, resizes and
// the terminal's output, which passes the guard like every byte that
// leaves a context. The shell is a process of the sandbox (the agent's
// exec with a pty): it ends with the connection, and the context keeps
// its files.
func (s *Server) shell(w http.ResponseWriter, r *http.Request) {
	if isWebSocket(r) {
		size, err := shellSize(r.URL.Query().Get("cols"), r.URL.Query().Get("rows"))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.shellWS(w, r, size)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), api.ShellProtocol) {
		s.writeError(w, r, fmt.Errorf("a shell needs the request upgraded to %s (Connection: Upgrade, Upgrade: %s); `sandlot shell` speaks it: %w",
			api.ShellProtocol, api.ShellProtocol, errdefs.ErrInvalidArgument))
		return
	}
	size, err := shellSize(r.URL.Query().Get("cols"), r.URL.Query().Get("rows"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	hijacked := false
	err = s.withContext(r, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return fmt.Errorf("shell: hijack: %w", err)
		}
		hijacked = true
		defer conn.Close()
		_ = conn.SetDeadline(time.Time{}) // the server's and the front door's deadlines were for the request
		if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + api.ShellProtocol + "\r\n\r\n"); err != nil {
			return nil
		}
		if err := brw.Flush(); err != nil {
			return nil
		}
		s.serveShell(ctx, r, rec, sb, conn, brw.Reader, size)
		return nil
	})
	if err != nil && !hijacked {
		s.writeError(w, r, err)
	}
}

// shellSize parses the terminal's size (default 80x24).
func shellSize(cols, rows string) (api.ShellSize, error) {
	size := api.ShellSize{Cols: 80, Rows: 24}
	for _, f := range []struct {
		name, v string
		dst     *int
	}{{"cols", cols, &size.Cols}, {"rows", rows, &size.Rows}} {
		if f.v == "" {
			continue
		}
		n, err := strconv.Atoi(f.v)
		if err != nil || n < 1 || n > 1000 {
			return size, fmt.Errorf("%s must be a number from 1 to 1000: %w", f.name, errdefs.ErrInvalidArgument)
		}
		*f.dst = n
	}
	return size, nil
}

// serveShell runs the session on conn until the shell exits or the client
// goes.
func (s *Server) serveShell(ctx context.Context, r *http.Request, rec *contexts.Record, sb contexts.Sandbox, conn net.Conn, in *bufio.Reader, size api.ShellSize) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := newShellWriter(conn, cancel)
	defer out.close()

	// The context lives while the shell does.
	go s.touchWhileOpen(ctx, rec)

	pid := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.shellInput(ctx, sb, in, pid, cancel)
	}()
	res, err := sb.Exec(ctx, agent.ExecParams{
		Argv:      []string{"/bin/bash", "-l"},
		Env:       map[string]string{"TERM": "xterm-256color"},
		Pty:       &agent.PtySize{Cols: uint16(size.Cols), Rows: uint16(size.Rows)},
		KeepStdin: true,
		Stream:    true,
		TimeoutMs: -1, // ends with the connection
		Tag:       "shell",
	}, func(ev agent.OutputEvent) {
		switch ev.Stream {
		case agent.Start:
			select {
			case pid <- ev.PID:
			default:
			}
		case agent.Pty, agent.Stdout, agent.Stderr:
			out.send(api.ShellOutput{Type: api.ShellData, Data: ev.Data})
		}
	})
	switch {
	case err != nil && ctx.Err() != nil: // the client went
	case err != nil:
		s.log.Warn("shell", slog.String(logkey.RequestID, r.Header.Get(api.HeaderRequestID)), slog.String(logkey.Context, rec.ID),
			slog.String(logkey.Err, guard.SanitizeError(err.Error())))
		out.send(api.ShellOutput{Type: api.ShellError, Code: errdefs.CodeOf(err), Message: guard.SanitizeError(errdefs.PublicMessage(err))})
	default:
		out.send(api.ShellOutput{Type: api.ShellExit, ExitCode: res.ExitCode})
	}
	out.flush()
	cancel()
	conn.Close() // unblocks the input reader
	<-done
}

// shellInput reads the client's lines and hands them to the shell: stdin,
// resizes and EOF. It cancels the session when the client goes or breaks
// the protocol.
func (s *Server) shellInput(ctx context.Context, sb contexts.Sandbox, in *bufio.Reader, pidCh <-chan int, cancel func()) {
	defer cancel()
	var pid int
	select {
	case pid = <-pidCh:
	case <-ctx.Done():
		return
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxShellLine)
	for sc.Scan() {
		var msg api.ShellInput
		if err := api.UnmarshalStrict(sc.Bytes(), &msg); err != nil {
			return
		}
		var err error
		switch {
		case msg.Resize != nil:
			if msg.Resize.Cols < 1 || msg.Resize.Cols > 1000 || msg.Resize.Rows < 1 || msg.Resize.Rows > 1000 {
				return
			}
			err = sb.Signal(ctx, agent.SignalParams{PID: pid, Signal: "SIGWINCH", Cols: uint16(msg.Resize.Cols), Rows: uint16(msg.Resize.Rows)})
		case msg.EOF:
			err = sb.Stdin(ctx, agent.StdinParams{PID: pid, EOF: true})
		case msg.Stdin != "":
			err = sb.Stdin(ctx, agent.StdinParams{PID: pid, Data: msg.Stdin})
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return
		}
	}
}

// touchWhileOpen keeps the session's context from expiring while the
// shell is open: every shellTouch it uses the context, confined to its id
// (never making one).
func (s *Server) touchWhileOpen(ctx context.Context, rec *contexts.Record) {
	t := time.NewTicker(shellTouch)
	defer t.Stop()
	noop := func(context.Context, *contexts.Record, contexts.Sandbox) error { return nil }
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = s.cfg.Contexts.Use(ctx, rec.Identity, contexts.CreateOptions{ContextID: rec.ID}, noop)
	}
}

// shellWriter sends output lines to the client from a queue of bounded
// size, so the sandbox's connection, which delivers the output, never
// waits for the client.
type shellWriter struct {
	conn   net.Conn
	cancel func()

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	closed  bool
	wake    chan struct{}
	drained chan struct{}
}

func newShellWriter(conn net.Conn, cancel func()) *shellWriter {
	w := &shellWriter{conn: conn, cancel: cancel, wake: make(chan struct{}, 1), drained: make(chan struct{})}
	go w.loop()
	return w
}

// send queues one line; past maxShellBacklog the session ends.
func (w *shellWriter) send(o api.ShellOutput) {
	b, err := json.Marshal(o)
	if err != nil {
		return
	}
	b = append(b, '\n')
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	if w.queued+len(b) > maxShellBacklog {
		w.mu.Unlock()
		w.cancel() // a client that does not read
		return
	}
	w.queue = append(w.queue, b)
	w.queued += len(b)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *shellWriter) loop() {
	defer close(w.drained)
	for {
		w.mu.Lock()
		q := w.queue
		w.queue, w.queued = nil, 0
		closed := w.closed
		w.mu.Unlock()
		for _, b := range q {
			if _, err := w.conn.Write(b); err != nil {
				w.cancel()
				w.mu.Lock()
				w.closed = true
				w.mu.Unlock()
				return
			}
		}
		if closed && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			<-w.wake
		}
	}
}

// flush waits (a little) for the queued lines to be written.
func (w *shellWriter) flush() {
	w.close()
	select {
	case <-w.drained:
	case <-time.After(5 * time.Second):
	}
}

func (w *shellWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
