package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeAgent listens on a unix socket and hands each request to reply,
// which writes whatever raw bytes it likes back.
// listenUnix listens on a fresh unix socket, closed at the end of the test.
func listenUnix(t *testing.T) (string, net.Listener) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return sock, ln
}

func fakeAgent(t *testing.T, reply func(w io.Writer, req Request)) string {
	t.Helper()
	sock, ln := listenUnix(t)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				var wmu sync.Mutex
				sc := bufio.NewScanner(conn)
				sc.Buffer(make([]byte, 1<<20), MaxFrame)
				for sc.Scan() {
					var req Request
					if json.Unmarshal(sc.Bytes(), &req) != nil {
						return
					}
					go func() {
						wmu.Lock()
						defer wmu.Unlock()
						reply(conn, req)
					}()
				}
			}()
		}
	}()
	return sock
}

func dialFake(t *testing.T, sock string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), sock, ClientConfig{SandboxID: "sb1", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientHostileFrames(t *testing.T) {
	huge := `{"jsonrpc":"2.0","id":1,"result":{"stdout":"` + strings.Repeat("a", MaxFrame+10) + `"}}` + "\n"
	cases := []struct {
		name  string
		reply func(w io.Writer, req Request) string
	}{
		{"garbage", func(io.Writer, Request) string { return "\x00\x01garbage{{{\n" }},
		{"huge frame", func(io.Writer, Request) string { return huge }},
		{"huge frame without newline", func(io.Writer, Request) string { return strings.Repeat("x", MaxFrame+100) }},
		{"unknown id", func(io.Writer, Request) string { return `{"jsonrpc":"2.0","id":999,"result":{}}` + "\n" }},
		{"wrong version", func(_ io.Writer, r Request) string { return `{"jsonrpc":"1.0","id":1,"result":{}}` + "\n" }},
		{"result and error", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}` + "\n"
		}},
		{"output for unknown call", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","method":"output","params":{"ref":12345,"stream":"stdout","data":"x"}}` + "\n"
		}},
		{"bad result type", func(io.Writer, Request) string { return `{"jsonrpc":"2.0","id":1,"result":[1,2]}` + "\n" }},
		{"request from agent", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"method":"exec","params":{}}` + "\n"
		}},
		// Frames in the agent's own layout (parsed in one pass) with a
		// hostile tail: every shape check still applies.
		{"result then another id", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{},"id":2}` + "\n"
		}},
		{"result then null id", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{},"id":null}` + "\n"
		}},
		{"result then a method", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{},"method":"exec"}` + "\n"
		}},
		{"result then another version", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{},"jsonrpc":"1.0"}` + "\n"
		}},
		{"result with a leading zero id", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":01,"result":{}}` + "\n"
		}},
		{"result with trailing garbage", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{}}}` + "\n"
		}},
		{"result of the wrong type", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":"yes"}` + "\n"
		}},
		{"result field of the wrong type", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{"success":"yes","exitCode":"0"}}` + "\n"
		}},
		{"result and a later error", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}` + "\n"
		}},
		{"output with an id", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","method":"output","params":{"ref":1,"stream":"stdout","data":"x"},"id":1}` + "\n"
		}},
		{"output with a result", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","method":"output","params":{"ref":1,"stream":"stdout","data":"x"},"result":{}}` + "\n"
		}},
		{"output then another method", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","method":"output","params":{"ref":1,"stream":"stdout","data":"x"},"method":"exec"}` + "\n"
		}},
		{"output with bad params", func(io.Writer, Request) string {
			return `{"jsonrpc":"2.0","method":"output","params":{"ref":"one"}}` + "\n"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := fakeAgent(t, func(w io.Writer, req Request) {
				_, _ = io.WriteString(w, tc.reply(w, req))
			})
			c := dialFake(t, sock)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// A second call stays pending and must fail too.
			errc := make(chan error, 1)
			go func() {
				_, err := c.RunCode(ctx, RunCodeParams{Language: "python", Code: "1"}, nil)
				errc <- err
			}()
			_, err := c.Exec(ctx, ExecParams{Shell: "true"}, nil)
			if !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("Exec error = %v, want unavailable", err)
			}
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Fatal("client did not close")
			}
			if !errors.Is(c.Err(), errdefs.ErrUnavailable) {
				t.Fatalf("Err() = %v", c.Err())
			}
			if err := <-errc; !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("pending call error = %v, want unavailable", err)
			}
			if err := c.Ping(ctx); !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("call after close = %v", err)
			}
		})
	}
}

func TestClientDuplicateResponse(t *testing.T) {
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		line := `{"jsonrpc":"2.0","id":` + jsonID(req) + `,"result":{"version":"1"}}` + "\n"
		_, _ = io.WriteString(w, line+line)
	})
	c := dialFake(t, sock)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("first ping: %v", err)
	}
	// The calls read the connection themselves (clientwait.go): the
	// duplicate, written after the first reply, is read by the next call,
	// which it fails.
	if err := c.Ping(context.Background()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("the call after a duplicate response = %v, want unavailable", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a response to a finished call did not close the client")
	}
	if !errors.Is(c.Err(), ErrProtocol) {
		t.Fatalf("Err() = %v, want a protocol violation", c.Err())
	}
}

func jsonID(req Request) string {
	b, _ := json.Marshal(req.ID)
	return string(b)
}

func TestClientErrorCategories(t *testing.T) {
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		var cat string
		_ = json.Unmarshal(req.Params, &struct {
			Path *string `json:"path"`
		}{&cat})
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(req)+`,"error":{"code":-32000,"message":"nope","data":{"category":"`+cat+`"}}}`+"\n")
	})
	c := dialFake(t, sock)
	for _, tc := range []struct {
		cat  string
		want error
	}{
		{"not_found", errdefs.ErrNotFound},
		{"already_exists", errdefs.ErrAlreadyExists},
		{"failed_precondition", errdefs.ErrFailedPrecondition},
		{"invalid_argument", errdefs.ErrInvalidArgument},
		{"bogus", errdefs.ErrInternal},
	} {
		_, err := c.Stat(context.Background(), tc.cat)
		if !errors.Is(err, tc.want) {
			t.Errorf("category %s: err = %v, want %v", tc.cat, err, tc.want)
		}
	}
	if c.Err() != nil {
		t.Fatalf("application errors closed the client: %v", c.Err())
	}
}

func TestClientCancelAbandonsCall(t *testing.T) {
	var mu sync.Mutex
	var cancels []uint64
	release := make(chan struct{})
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		switch req.Method {
		case MethodCancel:
			var p CancelParams
			_ = json.Unmarshal(req.Params, &p)
			mu.Lock()
			cancels = append(cancels, p.Ref)
			mu.Unlock()
			close(release)
		case MethodExec:
			go func() {
				<-release
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(req)+`,"result":{"exitCode":137}}`+"\n")
			}()
		default:
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(req)+`,"result":{}}`+"\n")
		}
	})
	c := dialFake(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Exec(ctx, ExecParams{Shell: "sleep 100"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errdefs.ErrDeadlineExceeded) && errdefs.CodeOf(err) != errdefs.CodeDeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
	// The late response to the abandoned call must not kill the client.
	time.Sleep(100 * time.Millisecond)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping after abandoned call: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(cancels) != 1 || cancels[0] != 1 {
		t.Fatalf("cancel notifications = %v, want [1]", cancels)
	}
}

func TestClientOutputBudget(t *testing.T) {
	chunk := strings.Repeat("x", 64<<10)
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		// Stream far more than the budget allows, never answering.
		for i := 0; i < 40; i++ {
			if _, err := io.WriteString(w, `{"jsonrpc":"2.0","method":"output","params":{"ref":`+jsonID(req)+`,"stream":"stdout","data":"`+chunk+`"}}`+"\n"); err != nil {
				return
			}
		}
	})
	c, err := Dial(context.Background(), sock, ClientConfig{SandboxID: "sb", MaxCallOutput: 1 << 20, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got int
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.RunCode(ctx, RunCodeParams{Language: "python", Code: "flood()", Stream: true}, func(ev OutputEvent) { got += len(ev.Data) })
	if !errors.Is(err, errdefs.ErrUnavailable) || !errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v", err)
	}
	if got > 1<<20 {
		t.Fatalf("delivered %d bytes past a 1 MiB budget", got)
	}
}

func TestClientRoutesOutputToCaller(t *testing.T) {
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		var p RunCodeParams
		_ = json.Unmarshal(req.Params, &p)
		id := jsonID(req)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","method":"output","params":{"ref":`+id+`,"stream":"stdout","data":"`+p.Code+`"}}`+"\n")
		time.Sleep(10 * time.Millisecond)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"success":true,"stdout":"`+p.Code+`"}}`+"\n")
	})
	c := dialFake(t, sock)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := "c" + strings.Repeat("i", i)
			var streamed string
			r, err := c.RunCode(context.Background(), RunCodeParams{Code: code, Stream: true}, func(ev OutputEvent) { streamed += ev.Data })
			if err != nil || r.Stdout != code || streamed != code {
				t.Errorf("call %d: %v %+v streamed %q", i, err, r, streamed)
			}
		}()
	}
	wg.Wait()
}

// deadlineCounter counts write-deadline updates on a connection.
type deadlineCounter struct {
	net.Conn
	n int
}

func (d *deadlineCounter) SetWriteDeadline(t time.Time) error {
	d.n++
	return d.Conn.SetWriteDeadline(t)
}

// TestClientWriteDeadlineNotPerCall: the write timeout is armed once and
// refreshed only when half of it is used, not re-armed (a timer update) on
// every call.
func TestClientWriteDeadlineNotPerCall(t *testing.T) {
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(req)+`,"result":{"version":"1"}}`+"\n")
	})
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	dc := &deadlineCounter{Conn: conn}
	c := NewClient(dc, ClientConfig{Logger: discardLogger()})
	defer c.Close()
	for i := 0; i < 100; i++ {
		if err := c.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c.wmu.Lock()
	n := dc.n
	c.wmu.Unlock()
	if n > 2 {
		t.Errorf("100 calls set the write deadline %d times", n)
	}
}

// TestClientKeepsAgentReason: the public sentence of an agent's error is its
// own message whole, the OS's reason included, without the sandbox id and
// method the log gets (before, "permission denied" was trimmed as if it
// were the category's word, and the E2B SDK showed "403: read /x").
func TestClientKeepsAgentReason(t *testing.T) {
	sock := fakeAgent(t, func(w io.Writer, req Request) {
		var msg string
		_ = json.Unmarshal(req.Params, &struct {
			Path *string `json:"path"`
		}{&msg})
		b, _ := json.Marshal(msg)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(req)+`,"error":{"code":-32000,"message":`+string(b)+`,"data":{"category":"permission_denied"}}}`+"\n")
	})
	c := dialFake(t, sock)
	for _, msg := range []string{
		"read /home/user/x: permission denied",
		"read /proc/self/environ: file calls do not read or write /proc or /sys (a command can)",
	} {
		_, err := c.Stat(context.Background(), msg)
		if !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Fatalf("%q: category of %v", msg, err)
		}
		if got := errdefs.PublicMessage(err); got != msg {
			t.Errorf("public message %q, want the agent's %q", got, msg)
		}
	}
}

// A call without a result (RestartKernel) takes its answer checked but
// not decoded (discardable): a well-formed one ends the call, and every
// hostile shape still closes the connection.
func TestClientResultlessFrames(t *testing.T) {
	cases := []struct {
		name  string
		frame string // %s is the request's id
		ok    bool
	}{
		{"empty object", `{"jsonrpc":"2.0","id":%s,"result":{}}`, true},
		{"any value", `{"jsonrpc":"2.0","id":%s,"result":[1,{"a":"}"},null]}`, true},
		{"spaces around the value", `{"jsonrpc":"2.0","id":%s,"result": {} }`, true},
		{"another key after the result", `{"jsonrpc":"2.0","id":%s,"result":{},"id":999}`, false},
		{"a method after the result", `{"jsonrpc":"2.0","id":%s,"result":{},"method":"exec"}`, false},
		{"another version after the result", `{"jsonrpc":"2.0","id":%s,"result":{},"jsonrpc":"1.0"}`, false},
		{"an error after the result", `{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":1,"message":"x"}}`, false},
		{"trailing brace", `{"jsonrpc":"2.0","id":%s,"result":{}}}`, false},
		{"two values", `{"jsonrpc":"2.0","id":%s,"result":{} {}}`, false},
		{"no value", `{"jsonrpc":"2.0","id":%s,"result":}`, false},
		{"unterminated", `{"jsonrpc":"2.0","id":%s,"result":{}`, false},
		{"leading zero id", `{"jsonrpc":"2.0","id":0%s,"result":{}}`, false},
		{"bad value", `{"jsonrpc":"2.0","id":%s,"result":{"a":}}`, false},
		{"unknown id", `{"jsonrpc":"2.0","id":9%s,"result":{}}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := fakeAgent(t, func(w io.Writer, req Request) {
				fmt.Fprintf(w, tc.frame+"\n", jsonID(req))
			})
			c := dialFake(t, sock)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.RestartKernel(ctx, KernelParams{Language: "python"})
			if tc.ok {
				if err != nil {
					t.Fatalf("RestartKernel = %v", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrUnavailable) {
				t.Fatalf("RestartKernel = %v, want unavailable", err)
			}
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Fatal("client did not close")
			}
		})
	}
}

// The ping that rides ahead of a request (WithProbe) is answered in the
// discardable layout; a hostile answer to it closes the connection
// before the request's answer is read.
func TestClientProbeAnswerChecked(t *testing.T) {
	for _, tc := range []struct {
		name, ping string
		ok         bool
	}{
		{"well formed", `{"jsonrpc":"2.0","id":%s,"result":{"version":"x","uptimeMs":1,"pid":7}}`, true},
		{"a method after the result", `{"jsonrpc":"2.0","id":%s,"result":{},"method":"exec"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := fakeAgent(t, func(w io.Writer, req Request) {
				if req.Method == MethodPing {
					fmt.Fprintf(w, tc.ping+"\n", jsonID(req))
					return
				}
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"success":true,"stdout":"2\n"}}`+"\n", jsonID(req))
			})
			c := dialFake(t, sock)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := c.RunCode(WithProbe(ctx), RunCodeParams{Language: "python", Code: "print(2)"}, nil)
			if tc.ok {
				if err != nil || r.Stdout != "2\n" {
					t.Fatalf("RunCode = %+v, %v", r, err)
				}
				if err := c.Ping(ctx); err != nil {
					t.Fatalf("the connection did not survive a good probe: %v", err)
				}
				return
			}
			// The fake answers each frame on its own goroutine, so the
			// request's answer may come first: the connection must end
			// either way, at the latest when the next call reads the
			// ping's answer (the calls read the connection themselves).
			_ = c.Ping(ctx)
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Fatal("client did not close")
			}
			if !errors.Is(c.Err(), ErrProtocol) {
				t.Fatalf("Err() = %v, want a protocol violation", c.Err())
			}
		})
	}
}
