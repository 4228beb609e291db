package envd

import (
	"fmt"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"

	pb "github.com/sandlot/sandlot/e2bwire/process"
)

// procTable tracks processes started through this handler so Connect can
// re-attach to them. Keyed by sandbox id and pid.
type procTable struct {
	ended func(sid string) bool // a sandbox that ended keeps no process (core.Edge.Ended)

	mu    sync.Mutex
	procs map[string]*proc
}

func newProcTable(ended func(sid string) bool) *procTable {
	return &procTable{ended: ended, procs: map[string]*proc{}}
}

func (t *procTable) start(sid string) *proc { return &proc{sid: sid, subs: map[*subscriber]bool{}} }

func (t *procTable) started(p *proc, pid int) {
	p.mu.Lock()
	p.pid = pid
	p.mu.Unlock()
	t.mu.Lock()
	if !t.ended(p.sid) {
		t.procs[p.sid+"/"+strconv.Itoa(pid)] = p
	}
	t.mu.Unlock()
}

// getOrAdd returns the proc of sid/pid, or a new one registered under it
// (created true), atomically: concurrent re-attaches share one.
func (t *procTable) getOrAdd(sid string, pid int) (p *proc, created bool) {
	key := sid + "/" + strconv.Itoa(pid)
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.procs[key]; p != nil {
		return p, false
	}
	p = &proc{sid: sid, pid: pid, subs: map[*subscriber]bool{}}
	if !t.ended(sid) {
		t.procs[key] = p
	}
	return p, true
}

func (t *procTable) get(sid string, pid int) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.procs[sid+"/"+strconv.Itoa(pid)]
}

func (t *procTable) remove(p *proc) {
	p.mu.Lock()
	key := p.sid + "/" + strconv.Itoa(p.pid)
	p.mu.Unlock()
	t.mu.Lock()
	if t.procs[key] == p {
		delete(t.procs, key)
	}
	t.mu.Unlock()
}

// proc fans one process's events out to its subscribers.
type proc struct {
	sid string

	mu   sync.Mutex
	pid  int
	subs map[*subscriber]bool
	done bool
	end  *pb.ProcessEvent
	err  error
}

func (p *proc) hasStarted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid != 0
}

func (p *proc) subscribe() *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		if p.end != nil {
			s.queue = append(s.queue, p.end)
		}
		s.done, s.err = true, p.err
		return s
	}
	p.subs[s] = true
	return s
}

func (p *proc) unsubscribe(s *subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
}

func (p *proc) publish(ev *pb.ProcessEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.subs {
		s.push(ev, false, nil)
	}
}

// finish ends p with its end event or error; the first finish counts
// (its sandbox's end may come before its call's).
func (p *proc) finish(end *pb.ProcessEvent, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done, p.end, p.err = true, end, err
	for s := range p.subs {
		s.push(end, true, err)
	}
}

// maxQueuedOutput bounds the output bytes queued for one subscriber (one
// Start or Connect stream) that reads slower than its process writes.
const maxQueuedOutput = 4 << 20

// eventOverhead is what one queued event costs beyond its output bytes.
const eventOverhead = 64

// subscriber is one stream's queue of a process's events. The sandbox's
// output callback never blocks on a slow client, so the queue is bounded
// instead: past maxQueuedOutput the oldest queued output is dropped, and
// the stream says so where the gap is (a stderr line) and at the end (the
// end event's error). The newest output, the tail, is always delivered.
type subscriber struct {
	wake chan struct{}

	mu      sync.Mutex
	queue   []*pb.ProcessEvent
	bytes   int64 // output bytes (plus overhead) in queue
	dropped int64 // output bytes dropped since the last take
	lost    int64 // output bytes dropped in all
	done    bool
	err     error
}

func eventSize(ev *pb.ProcessEvent) int64 {
	d := ev.GetData()
	if d == nil {
		return 0
	}
	return int64(len(d.GetStdout())+len(d.GetStderr())+len(d.GetPty())) + eventOverhead
}

func (s *subscriber) push(ev *pb.ProcessEvent, done bool, err error) {
	s.mu.Lock()
	if ev != nil {
		size := eventSize(ev)
		s.queue = append(s.queue, ev)
		s.bytes += size
		s.shed()
	}
	if done {
		s.done, s.err = true, err
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// shed drops the oldest output events until the queue is within bounds.
// Events without output (start, end) are kept. Precondition: s.mu held.
func (s *subscriber) shed() {
	if s.bytes <= maxQueuedOutput {
		return
	}
	kept := s.queue[:0]
	for i, ev := range s.queue {
		size := eventSize(ev)
		if size == 0 || s.bytes <= maxQueuedOutput || i == len(s.queue)-1 {
			kept = append(kept, ev)
			continue
		}
		s.bytes -= size
		s.dropped += size - eventOverhead
		s.lost += size - eventOverhead
	}
	clear(s.queue[len(kept):])
	s.queue = kept
}

// take returns the queued events, preceded by a notice of the output
// dropped before them, if any.
func (s *subscriber) take() ([]*pb.ProcessEvent, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.bytes = nil, 0
	if s.dropped > 0 {
		note := fmt.Sprintf("\n[sandlot: %d bytes of output dropped here: the client read slower than the process wrote]\n", s.dropped)
		q = append([]*pb.ProcessEvent{{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{
			Output: &pb.ProcessEvent_DataEvent_Stderr{Stderr: []byte(note)}}}}}, q...)
		s.dropped = 0
	}
	if s.done && s.lost > 0 {
		q = withLossNote(q, s.lost)
		s.lost = 0
	}
	return q, s.done, s.err
}

// withLossNote records lost output bytes on the end event in q (a copy;
// other subscribers share the event).
func withLossNote(q []*pb.ProcessEvent, lost int64) []*pb.ProcessEvent {
	for i, ev := range q {
		end := ev.GetEnd()
		if end == nil {
			continue
		}
		c := proto.Clone(end).(*pb.ProcessEvent_EndEvent)
		note := fmt.Sprintf("output incomplete: %d bytes dropped because the client read too slowly", lost)
		if c.Error != nil && *c.Error != "" {
			note = *c.Error + "; " + note
		}
		c.Error = &note
		q[i] = &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: c}}
	}
	return q
}

// holds reports whether the table has a process of sandbox sid.
func (t *procTable) holds(sid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.sid == sid {
			return true
		}
	}
	return false
}

// forget finishes and drops the processes of sandbox sid, which ended:
// their streams drop (errSandboxEnded), as E2B's edge drops them when a
// sandbox goes.
func (t *procTable) forget(sid string) {
	t.mu.Lock()
	var gone []*proc
	for key, p := range t.procs {
		if p.sid == sid {
			gone = append(gone, p)
			delete(t.procs, key)
		}
	}
	t.mu.Unlock()
	for _, p := range gone {
		p.finish(nil, errSandboxEnded)
	}
}
