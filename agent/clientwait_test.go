package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// scriptedAgent accepts one connection on a unix socket and hands it to
// serve, which reads requests (next) and writes what it likes.
func scriptedAgent(t *testing.T, serve func(conn net.Conn, next func() Request)) *Client {
	t.Helper()
	sock, ln := listenUnix(t)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 1<<20), MaxFrame)
		serve(conn, func() Request {
			var req Request
			if sc.Scan() {
				_ = json.Unmarshal(sc.Bytes(), &req)
			}
			return req
		})
	}()
	return dialFake(t, sock)
}

func pingReply(req Request) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"version":"1"}}`+"\n", jsonID(req))
}

// TestCallsReadTheirOwnReplies: on a unix socket the calls read the
// connection themselves (no read loop), and a reply goes to its call
// whichever call read it.
func TestCallsReadTheirOwnReplies(t *testing.T) {
	release := make(chan struct{})
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		a, b := next(), next()
		<-release
		// b's reply first: a's reader routes it, then reads its own.
		io.WriteString(conn, pingReply(b)+pingReply(a))
		for {
			r := next()
			if r.ID == nil {
				return
			}
			io.WriteString(conn, pingReply(r))
		}
	})
	if c.rd == nil {
		t.Fatal("a unix socket's client has a read loop: the calls should read it themselves")
	}
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { errs <- c.Ping(context.Background()) }()
		// one after the other, so that the agent reads both
		testWaitPending(t, c, i+1)
	}
	close(release)
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// testWaitPending waits until n calls are pending.
func testWaitPending(t *testing.T, c *Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.pending)
		c.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls pending, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReaderThatGivesUpHandsOn: the call that reads the connection gives
// up (its context ends) while another call waits; the other call reads
// on and gets its reply, and the late reply of the first, read by the
// next call, is dropped.
func TestReaderThatGivesUpHandsOn(t *testing.T) {
	replyB := make(chan struct{})
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		a := next() // never answered until the end
		b := next()
		<-replyB
		io.WriteString(conn, pingReply(b))
		io.WriteString(conn, pingReply(a)) // late: a gave up
		for {
			r := next()
			if r.ID == nil {
				return
			}
			if r.Method == MethodPing {
				io.WriteString(conn, pingReply(r))
			}
		}
	})
	actx, cancel := context.WithCancel(context.Background())
	aerr := make(chan error, 1)
	go func() { aerr <- c.Ping(actx) }()
	testWaitPending(t, c, 1)
	berr := make(chan error, 1)
	go func() { berr <- c.Ping(context.Background()) }()
	testWaitPending(t, c, 2)
	cancel()
	select {
	case err := <-aerr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the call that gave up = %v, want canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call that gave up is still waiting")
	}
	close(replyB)
	select {
	case err := <-berr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other call's reply was never read after the reader gave up")
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("the call after a late reply: %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("the client closed: %v", c.Err())
	}
}

// TestCanceledWhileReading: a call that is the reader and waits in the
// netpoller returns when its context ends, and the connection stays
// good: the reply that comes after is dropped by the next call.
func TestCanceledWhileReading(t *testing.T) {
	late := make(chan struct{})
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		a := next()
		<-late
		// Half a frame, a pause, then the rest: a deadline between them
		// must not lose the first half.
		line := pingReply(a)
		io.WriteString(conn, line[:10])
		time.Sleep(50 * time.Millisecond)
		io.WriteString(conn, line[10:])
		for {
			r := next()
			if r.ID == nil {
				return
			}
			io.WriteString(conn, pingReply(r))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	perr := make(chan error, 1)
	go func() { perr <- c.Ping(ctx) }()
	select {
	case err := <-perr:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ping = %v, want deadline exceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call reading the connection did not return at its deadline")
	}
	close(late)
	for i := 0; i < 3; i++ {
		// The first may start reading mid-frame after a deadline of its
		// own cut a read short.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_ = c.Ping(ctx)
		cancel()
	}
	if err := c.Ping(context.Background()); err != nil || c.Err() != nil {
		t.Fatalf("Ping after the cancels = %v (client: %v)", err, c.Err())
	}
}

// TestHangupBetweenCalls: the agent goes away while no call waits. No one
// reads then, but the hang-up watch closes the client at once, so Done
// tells a dead sandbox before the next call.
func TestHangupBetweenCalls(t *testing.T) {
	hangup := make(chan struct{})
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		io.WriteString(conn, pingReply(next()))
		<-hangup
		conn.Close()
	})
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		t.Fatal("closed before the agent hung up")
	case <-time.After(50 * time.Millisecond):
	}
	close(hangup)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent hung up between calls and Done did not close")
	}
	if err := c.Ping(context.Background()); !errors.Is(err, ErrNotSent) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("the call after a hang-up = %v, want not sent, unavailable", err)
	}
}

// TestManyCallersOneConnection: concurrent calls, some giving up, on a
// real agent: every call that did not give up gets its own answer.
func TestManyCallersOneConnection(t *testing.T) {
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		var wmu sync.Mutex
		for {
			r := next()
			if r.ID == nil {
				return
			}
			go func() {
				time.Sleep(time.Duration(*r.ID%3) * time.Millisecond)
				wmu.Lock()
				defer wmu.Unlock()
				var p ReadParams
				_ = json.Unmarshal(r.Params, &p)
				b, _ := json.Marshal(ReadResult{Data: []byte(p.Path)})
				fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", jsonID(r), b)
			}()
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				path := fmt.Sprintf("/g%d/%d", g, i)
				ctx, cancel := context.WithCancel(context.Background())
				if i%7 == 3 {
					cancel() // given up before or while it waits
				}
				r, err := c.ReadFile(ctx, ReadParams{Path: path})
				cancel()
				switch {
				case i%7 == 3:
				case err != nil:
					errs <- err
				case string(r.Data) != path:
					errs <- fmt.Errorf("call for %s got the answer for %s", path, r.Data)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c.Err() != nil {
		t.Fatalf("the client closed: %v", c.Err())
	}
}

// TestFrameReaderKeepsAPartialFrame: a read deadline that cuts a frame
// in two loses neither half.
func TestFrameReaderKeepsAPartialFrame(t *testing.T) {
	r := &stutter{parts: []string{`{"a":`, "", `1}` + "\n" + `{"b"`, "", `:2}` + "\n"}}
	fr := newFrameReader(r, MaxFrame)
	var got []string
	for len(got) < 2 {
		line, err := fr.next()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	if strings.Join(got, " ") != `{"a":1} {"b":2}` {
		t.Fatalf("frames %q", got)
	}
}

// stutter returns its parts one per Read; an empty part is a deadline.
type stutter struct{ parts []string }

func (s *stutter) Read(p []byte) (int, error) {
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	part := s.parts[0]
	s.parts = s.parts[1:]
	if part == "" {
		return 0, os.ErrDeadlineExceeded
	}
	return copy(p, part), nil
}

func outputLine(ref string, data string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"output","params":{"ref":%s,"stream":"stdout","data":%q}}`+"\n", ref, data)
}

// TestSlowCallbackHoldsNoOtherCall: a ping reads the connection, then a
// call that streams output starts, and its callback blocks; the ping
// still returns at its deadline. Read by the ping's own goroutine, the
// output would run the callback there, past the ping's deadline.
func TestSlowCallbackHoldsNoOtherCall(t *testing.T) {
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		next() // the ping, never answered
		x := next()
		io.WriteString(conn, outputLine(jsonID(x), "a"))
		next()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	perr := make(chan error, 1)
	go func() { perr <- c.Ping(ctx) }()
	testWaitPending(t, c, 1)
	time.Sleep(20 * time.Millisecond) // the ping waits in its read
	unblock := make(chan struct{})
	defer close(unblock)
	got := make(chan struct{}, 1)
	go c.Exec(context.Background(), ExecParams{Argv: []string{"x"}}, func(OutputEvent) {
		got <- struct{}{}
		<-unblock
	})
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the streaming call's output never reached its callback")
	}
	select {
	case err := <-perr:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ping = %v, want deadline exceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a ping made beside a blocked output callback did not return at its deadline")
	}
}

// TestLateOutputOfAnAbandonedCallIsRead: the caller of a streaming call
// gives up and no other call comes; the agent still writes the call's
// output, more than a socket holds, and its reply. The client reads it
// all: the agent counts a host that stops reading as gone.
func TestLateOutputOfAnAbandonedCallIsRead(t *testing.T) {
	wrote := make(chan error, 1)
	gaveUp := make(chan struct{})
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		x := next()
		<-gaveUp
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		chunk := strings.Repeat("y", 32<<10)
		var err error
		for i := 0; i < 64 && err == nil; i++ { // 2 MiB
			_, err = io.WriteString(conn, outputLine(jsonID(x), chunk))
		}
		if err == nil {
			_, err = fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":%s,"result":{"exitCode":0}}`+"\n", jsonID(x))
		}
		wrote <- err
		next()
	})
	ctx, cancel := context.WithCancel(context.Background())
	xerr := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, ExecParams{Argv: []string{"x"}}, func(OutputEvent) {})
		xerr <- err
	}()
	testWaitPending(t, c, 1)
	cancel()
	if err := <-xerr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec = %v, want canceled", err)
	}
	close(gaveUp)
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("the agent's late writes: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent's late writes never ended")
	}
	if c.Err() != nil {
		t.Fatalf("the client closed: %v", c.Err())
	}
}

// TestReadLoopOutlivesAStaleDeadline: on a connection a read loop reads
// (here an in-memory pipe), a read deadline left in the past (the
// handshake's, set as it ended) is cleared, not taken for a loss.
func TestReadLoopOutlivesAStaleDeadline(t *testing.T) {
	host, agentEnd := net.Pipe()
	go func() {
		sc := bufio.NewScanner(agentEnd)
		for sc.Scan() {
			var req Request
			_ = json.Unmarshal(sc.Bytes(), &req)
			io.WriteString(agentEnd, pingReply(req))
		}
	}()
	t.Cleanup(func() { agentEnd.Close() })
	_ = host.SetReadDeadline(time.Unix(1, 0))
	c := NewClient(host, ClientConfig{SandboxID: "sb1", Logger: discardLogger()})
	t.Cleanup(func() { c.Close() })
	if c.rd != nil {
		t.Fatal("an in-memory pipe's calls read it themselves")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping after a stale deadline = %v", err)
	}
}

// TestHangupWatchFailure: should the hang-up watch fail, a background
// reader reads from then on, and a hang-up between calls still closes
// the client.
func TestHangupWatchFailure(t *testing.T) {
	hangup := make(chan struct{})
	c := scriptedAgent(t, func(conn net.Conn, next func() Request) {
		io.WriteString(conn, pingReply(next()))
		io.WriteString(conn, pingReply(next()))
		<-hangup
		conn.Close()
	})
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.hup.Close() // the watch's wait fails
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		on := c.bgOn
		c.mu.Unlock()
		if on {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no reader took over from the failed watch")
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(hangup)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent hung up and Done did not close")
	}
}
