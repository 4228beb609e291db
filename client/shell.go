package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// Shell is an interactive bash on a terminal in a context (GET .../shell,
// upgraded to api.ShellProtocol). Send, Resize and CloseStdin may be
// called from any goroutine; Recv from one.
type Shell struct {
	rwc io.ReadWriteCloser
	in  *bufio.Scanner
	mu  sync.Mutex // serializes writes
}

// OpenShell opens a shell in t's context (created when t names a
// conversation without one) on a terminal of cols x rows (0: 80x24).
func (c *Client) OpenShell(ctx context.Context, t FileTarget, cols, rows int) (*Shell, error) {
	prefix, err := t.prefix()
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if cols > 0 && rows > 0 {
		q.Set("cols", strconv.Itoa(cols))
		q.Set("rows", strconv.Itoa(rows))
	}
	req, err := c.request(ctx, "GET", prefix+"/shell", t.query(q), nil, "")
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", api.ShellProtocol)
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("open shell: %w", ctxErr)
		}
		return nil, fmt.Errorf("GET %s: %w: %w", req.URL.Path, err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return nil, fmt.Errorf("open shell: the server answered %d, not an upgrade to %s: %w", resp.StatusCode, api.ShellProtocol, errdefs.ErrUnavailable)
		}
		return nil, errorFrom(resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("open shell: the connection cannot be written: %w", errdefs.ErrUnavailable)
	}
	sc := bufio.NewScanner(rwc)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	return &Shell{rwc: rwc, in: sc}, nil
}

func (s *Shell) write(m api.ShellInput) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.rwc.Write(append(b, '\n'))
	return err
}

// Send types p into the terminal.
func (s *Shell) Send(p []byte) error { return s.write(api.ShellInput{Stdin: string(p)}) }

// Resize tells the terminal its new size.
func (s *Shell) Resize(cols, rows int) error {
	return s.write(api.ShellInput{Resize: &api.ShellSize{Cols: cols, Rows: rows}})
}

// CloseStdin ends the input: the terminal reads ^D.
func (s *Shell) CloseStdin() error { return s.write(api.ShellInput{EOF: true}) }

// Recv returns the next output line: data, then exit or error last;
// io.EOF when the connection ended without either.
func (s *Shell) Recv() (api.ShellOutput, error) {
	var o api.ShellOutput
	if !s.in.Scan() {
		if err := s.in.Err(); err != nil {
			return o, err
		}
		return o, io.EOF
	}
	if err := json.Unmarshal(s.in.Bytes(), &o); err != nil {
		return o, fmt.Errorf("shell: a line that is not JSON: %w", err)
	}
	return o, nil
}

// Close ends the session; the shell is killed.
func (s *Shell) Close() error { return s.rwc.Close() }
