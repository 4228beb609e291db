package envd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	fspb "github.com/sandlot/sandlot/e2bwire/filesystem"
)

// Directory watching (WatchDir, and CreateWatcher / GetWatcherEvents /
// RemoveWatcher for the Python SDK's sync watch_dir) polls: every
// watchEvery the directory is listed through the agent (recursively when
// asked) and compared with the previous listing by type, size, mode and
// modification time. A new path is CREATE, a changed size or time WRITE, a
// changed mode CHMOD, a missing path REMOVE; a rename shows as REMOVE and
// CREATE, and changes within one interval that cancel out are not seen.
// Bounds: a listing of at most maxWatchEntries entries (a larger tree is
// refused, never watched in part), maxWatchers per sandbox, at most
// maxWatcherEvents queued per created watcher (the oldest are dropped), and
// a created watcher nobody has read for watcherIdle is removed.
const (
	watchEvery       = 500 * time.Millisecond
	maxWatchEntries  = 10_000
	maxWatchers      = 16
	maxWatcherEvents = 10_000
	watcherIdle      = 10 * time.Minute
)

type snapEntry struct {
	typ   string
	size  int64
	mode  uint32
	mtime int64
	info  *agent.FileInfo // for events that carry their entry (includeEntry)
}

// watchSnapshot lists root (which must be a directory) by path relative to it.
func (h *Handler) watchSnapshot(ctx context.Context, ref *core.Ref, root string, recursive bool) (string, map[string]snapEntry, error) {
	var abs string
	var list []agent.FileInfo
	err := h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		fi, err := sb.Stat(ctx, root)
		if err != nil {
			return err
		}
		if fi.Type != "dir" {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is not a directory", root))
		}
		abs = fi.Path
		depth := 1
		if recursive {
			depth = 64
		}
		list, err = sb.List(ctx, agent.ListParams{Path: abs, Depth: depth})
		return err
	})
	if err != nil {
		return "", nil, connectError(err)
	}
	if len(list) >= maxWatchEntries {
		return "", nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s has %d entries or more: too many to watch", root, maxWatchEntries))
	}
	snap := make(map[string]snapEntry, len(list))
	for _, fi := range list {
		name := strings.TrimPrefix(strings.TrimPrefix(fi.Path, abs), "/")
		snap[name] = snapEntry{typ: fi.Type, size: fi.Size, mode: fi.Mode, mtime: fi.ModTime, info: &fi}
	}
	return abs, snap, nil
}

// watchDiff returns the events that turn old into cur, by name. With
// entries, an event of a path that exists carries its entry info (envd
// 0.6.3's includeEntry); a removal carries none.
func watchDiff(old, cur map[string]snapEntry, entries bool) []*fspb.FilesystemEvent {
	var evs []*fspb.FilesystemEvent
	add := func(name string, t fspb.EventType) {
		ev := &fspb.FilesystemEvent{Name: name, Type: t}
		if c, ok := cur[name]; entries && ok && t != fspb.EventType_EVENT_TYPE_REMOVE && c.info != nil {
			ev.Entry = entryInfo(c.info)
		}
		evs = append(evs, ev)
	}
	for name, c := range cur {
		o, ok := old[name]
		switch {
		case !ok || o.typ != c.typ:
			if ok {
				add(name, fspb.EventType_EVENT_TYPE_REMOVE)
			}
			add(name, fspb.EventType_EVENT_TYPE_CREATE)
			// A file that appeared with content was also written to, as
			// inotify reports it (IN_CREATE, then IN_MODIFY): E2B's envd sends
			// both, and callers wait for the write of a new file.
			if c.typ == "file" && c.size > 0 {
				add(name, fspb.EventType_EVENT_TYPE_WRITE)
			}
		case o.size != c.size || o.mtime != c.mtime:
			add(name, fspb.EventType_EVENT_TYPE_WRITE)
		case o.mode != c.mode:
			add(name, fspb.EventType_EVENT_TYPE_CHMOD)
		}
	}
	for name := range old {
		if _, ok := cur[name]; !ok {
			add(name, fspb.EventType_EVENT_TYPE_REMOVE)
		}
	}
	slices.SortStableFunc(evs, func(a, b *fspb.FilesystemEvent) int { return strings.Compare(a.Name, b.Name) })
	return evs
}

// claim is one watch's hold on one of its sandbox's watcher slots.
type claim struct {
	cancel context.CancelCauseFunc // ends the watch
}

// claimWatcher takes one of sandbox sid's watcher slots (maxWatchers) for
// a watch running under ctx. It returns the watch's context, which ends
// when release gives the slot back or when the sandbox ends (its cause
// then core.SandboxGone: forget).
func (h *Handler) claimWatcher(ctx context.Context, sid string) (_ context.Context, release func(), _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.edge.Ended(sid) {
		return nil, nil, connectError(core.SandboxGone(sid))
	}
	if len(h.watching[sid]) >= maxWatchers {
		return nil, nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("a sandbox has at most %d directory watchers", maxWatchers))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	c := &claim{cancel: cancel}
	if h.watching[sid] == nil {
		h.watching[sid] = map[*claim]bool{}
	}
	h.watching[sid][c] = true
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel(nil)
			h.mu.Lock()
			if delete(h.watching[sid], c); len(h.watching[sid]) == 0 {
				delete(h.watching, sid)
			}
			h.mu.Unlock()
		})
	}, nil
}

// WatchDir streams a start event, then the directory's events as they are
// seen, with keepalives while idle, until the client goes away, its
// deadline passes or the sandbox ends.
func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[fspb.WatchDirRequest], stream *connect.ServerStream[fspb.WatchDirResponse]) error {
	ref := core.RefFrom(ctx)
	ctx, release, err := s.h.claimWatcher(ctx, ref.Rec.ID)
	if err != nil {
		return err
	}
	defer release()
	_, prev, err := s.h.watchSnapshot(ctx, ref, req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return err
	}
	if err := stream.Send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Start{Start: &fspb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	idle := time.Now()
	for {
		select {
		case <-ctx.Done():
			return connectError(context.Cause(ctx))
		case <-tick.C:
		}
		_, cur, err := s.h.watchSnapshot(ctx, ref, req.Msg.GetPath(), req.Msg.GetRecursive())
		if err != nil {
			if ctx.Err() != nil {
				return connectError(context.Cause(ctx))
			}
			return err
		}
		for _, ev := range watchDiff(prev, cur, req.Msg.GetIncludeEntry()) {
			if err := stream.Send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return err
			}
			idle = time.Now()
		}
		prev = cur
		if time.Since(idle) >= keepaliveEvery {
			if err := stream.Send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Keepalive{Keepalive: &fspb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
			idle = time.Now()
		}
	}
}

// watcher is a created watcher: a poll loop queueing events for
// GetWatcherEvents.
type watcher struct {
	sid     string
	release func() // its claim on the sandbox's watchers, which ends its poll loop (claimWatcher)

	mu       sync.Mutex
	events   []*fspb.FilesystemEvent
	dropped  int64
	err      error // the poll loop's end: the sandbox ended, the tree grew too large
	lastRead time.Time
}

func (s *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[fspb.CreateWatcherRequest]) (*connect.Response[fspb.CreateWatcherResponse], error) {
	ref := core.RefFrom(ctx)
	wctx, release, err := s.h.claimWatcher(context.WithoutCancel(ctx), ref.Rec.ID)
	if err != nil {
		return nil, err
	}
	_, prev, err := s.h.watchSnapshot(ctx, ref, req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		release()
		return nil, err
	}
	id := uuid.NewString()
	w := &watcher{sid: ref.Rec.ID, release: release, lastRead: time.Now()}
	s.h.mu.Lock()
	if wctx.Err() != nil {
		// its sandbox ended meanwhile (forget cancels claims under mu)
		s.h.mu.Unlock()
		release()
		return nil, connectError(context.Cause(wctx))
	}
	s.h.watchers[id] = w
	s.h.mu.Unlock()
	go func() {
		defer release()
		s.h.pollWatcher(wctx, ref, id, w, req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry(), prev)
	}()
	return connect.NewResponse(&fspb.CreateWatcherResponse{WatcherId: id}), nil
}

// pollWatcher feeds w until it is removed, idle too long or fails.
func (h *Handler) pollWatcher(ctx context.Context, ref *core.Ref, id string, w *watcher, path string, recursive, entries bool, prev map[string]snapEntry) {
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		idle := time.Since(w.lastRead) > watcherIdle
		w.mu.Unlock()
		if idle {
			h.removeWatcher(id)
			return
		}
		_, cur, err := h.watchSnapshot(ctx, ref, path, recursive)
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
			return
		}
		evs := watchDiff(prev, cur, entries)
		prev = cur
		w.mu.Lock()
		w.events = append(w.events, evs...)
		if over := len(w.events) - maxWatcherEvents; over > 0 {
			w.dropped += int64(over)
			w.events = append(w.events[:0:0], w.events[over:]...)
		}
		w.mu.Unlock()
	}
}

func (h *Handler) watcherOf(sid, id string) (*watcher, error) {
	h.mu.Lock()
	w := h.watchers[id]
	h.mu.Unlock()
	if w == nil || w.sid != sid {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %s not found", id))
	}
	return w, nil
}

func (h *Handler) removeWatcher(id string) {
	h.mu.Lock()
	w := h.watchers[id]
	delete(h.watchers, id)
	h.mu.Unlock()
	if w != nil {
		w.stop()
	}
}

// stop ends w's poll loop and gives back its claim at once, not when the
// loop notices (a client that removes a watcher and creates another at the
// limit must not be refused).
func (w *watcher) stop() { w.release() }

// GetWatcherEvents returns and clears the queued events; once the watcher
// has failed (its sandbox ended, say) it returns that error and is gone.
func (s *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[fspb.GetWatcherEventsRequest]) (*connect.Response[fspb.GetWatcherEventsResponse], error) {
	id := req.Msg.GetWatcherId()
	w, err := s.h.watcherOf(core.RefFrom(ctx).Rec.ID, id)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	evs, werr, dropped := w.events, w.err, w.dropped
	w.events, w.dropped, w.lastRead = nil, 0, time.Now()
	w.mu.Unlock()
	if dropped > 0 {
		s.h.log.Warn("e2b watcher dropped events: the client read too slowly", "watcher", id, "dropped", dropped)
	}
	if werr != nil && len(evs) == 0 {
		s.h.removeWatcher(id)
		var ce *connect.Error
		if errors.As(werr, &ce) {
			return nil, ce
		}
		return nil, connectError(werr)
	}
	if evs == nil {
		evs = []*fspb.FilesystemEvent{}
	}
	return connect.NewResponse(&fspb.GetWatcherEventsResponse{Events: evs}), nil
}

func (s *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[fspb.RemoveWatcherRequest]) (*connect.Response[fspb.RemoveWatcherResponse], error) {
	id := req.Msg.GetWatcherId()
	if _, err := s.h.watcherOf(core.RefFrom(ctx).Rec.ID, id); err != nil {
		return nil, err
	}
	s.h.removeWatcher(id)
	return connect.NewResponse(&fspb.RemoveWatcherResponse{}), nil
}

// stopWatchers ends the created directory watchers of sandbox sid, which
// paused or ended: E2B drops a paused sandbox's connections, and a
// watcher's polls would only be refused until it resumes.
func (h *Handler) stopWatchers(sid string) {
	h.mu.Lock()
	var stop []*watcher
	for id, w := range h.watchers {
		if w.sid == sid {
			stop = append(stop, w)
			delete(h.watchers, id)
		}
	}
	h.mu.Unlock()
	for _, w := range stop {
		w.stop()
	}
}
