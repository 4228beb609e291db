package server

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
)

// TestCoalescerKeepsTextOrderAndBound drives one call's coalescer from two
// writers (a process's stdout and stderr pumps) with pieces of every size,
// results between them, and the window's timer firing meanwhile: each
// stream's text arrives whole and in order, no event is past 64 KiB unless
// one write was, the call's end sends what its window still holds, and
// nothing the call emitted follows its reply, even what it emitted after its
// close. Run with -race, it also checks the timer and the writers share the
// state safely.
func TestCoalescerKeepsTextOrderAndBound(t *testing.T) {
	host, agentSide := net.Pipe()
	defer host.Close()
	c := &conn{s: &Server{cfg: Config{OutputWindow: 200 * time.Microsecond}}, c: agentSide, rw: agentSide}
	type frame struct {
		Method string            `json:"method"`
		ID     *uint64           `json:"id"`
		Params agent.OutputEvent `json:"params"`
	}
	var frames []frame
	read := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(host, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				read <- nil
				return
			}
			var f frame
			if err := json.Unmarshal(line, &f); err != nil {
				read <- err
				return
			}
			frames = append(frames, f)
		}
	}()

	q := newCoalescer(c, 7)
	sizes := []int{1, 2, 100, 3, coalesceMax - 1, 5, coalesceMax + 10, 7, 4000, 1}
	want := map[string]string{}
	var wg sync.WaitGroup
	var mu sync.Mutex // want's
	for _, stream := range []string{agent.Stdout, agent.Stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := sizes[i%len(sizes)]
				d := strings.Repeat(string(rune('a'+i%26)), n)
				mu.Lock()
				want[stream] += d
				mu.Unlock()
				q.emit(agent.OutputEvent{Stream: stream, Data: d})
				if i%50 == 0 {
					q.emit(agent.OutputEvent{Stream: agent.Result, Result: &agent.RichResult{Text: "r"}})
				}
				if i%17 == 0 {
					time.Sleep(time.Millisecond) // let the window's timer fire
				}
			}
		}()
	}
	wg.Wait()
	// A window that cannot end first: the call's end sends the tail.
	c.s.cfg.OutputWindow = time.Minute
	tail := newCoalescer(c, 7)
	tail.emit(agent.OutputEvent{Stream: agent.Stdout, Data: "tail"})
	want[agent.Stdout] += "tail"
	q.close()
	tail.close()
	c.write([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n")) // the reply
	// An event after the close (a late pump's) is dropped: the host
	// reads output after the reply as output for an unknown call.
	tail.emit(agent.OutputEvent{Stream: agent.Stdout, Data: "late"})
	tail.emit(agent.OutputEvent{Stream: agent.Result, Result: &agent.RichResult{Text: "late"}})
	// A timer that fires after the close (it was stopped as it fired)
	// sends nothing either: the close emptied the window and the late
	// emits were not kept.
	tail.fire()
	q.fire()
	agentSide.Close()
	if err := <-read; err != nil {
		t.Fatal(err)
	}

	got := map[string]string{}
	replied := false
	for _, f := range frames {
		if f.ID != nil {
			replied = true
			continue
		}
		if replied {
			t.Fatalf("an output event after the reply: %+v", f.Params)
		}
		if f.Method != "output" || f.Params.Ref != 7 {
			t.Fatalf("frame %+v", f)
		}
		if len(f.Params.Data) > coalesceMax && len(f.Params.Data) != coalesceMax+10 {
			t.Fatalf("an event of %d bytes", len(f.Params.Data))
		}
		got[f.Params.Stream] += f.Params.Data
	}
	if !replied {
		t.Fatal("no reply")
	}
	for _, s := range []string{agent.Stdout, agent.Stderr} {
		if got[s] != want[s] {
			t.Fatalf("%s: got %d bytes, want %d (equal prefix or order broken)", s, len(got[s]), len(want[s]))
		}
	}
}
