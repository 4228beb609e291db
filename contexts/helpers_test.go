package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
)

// clock is an injectable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is a manager over a memory store and the fake provider.
type env struct {
	t     *testing.T
	ctx   context.Context
	p     *contextstest.Provider
	store contexts.Store
	clock *clock
	m     *contexts.Manager
}

// newEnv starts a manager. cfg's zero Clock is replaced by a test clock,
// and a zero PoolSize by no pool (tests of the pool set it).
func newEnv(t *testing.T, cfg contexts.Config) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	return e.start(cfg)
}

func (e *env) start(cfg contexts.Config) *env {
	e.t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = e.clock.Now
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = -1
	}
	if cfg.CleanupInterval == 0 {
		cfg.CleanupInterval = time.Hour // tests call Cleanup themselves
	}
	e.m = contexts.NewManager(e.store, e.p, cfg)
	if err := e.m.Start(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	m := e.m
	e.t.Cleanup(func() { m.Close(context.Background()) })
	return e
}

// second returns another manager over the same store and provider (a
// second daemon, or the same one after a restart).
func (e *env) second(cfg contexts.Config) *env {
	e2 := *e
	return e2.start(cfg)
}

func ident(tenant, conv, path string) contexts.Identity {
	return contexts.Identity{TenantID: tenant, ConversationID: conv, PathID: path}
}

func (e *env) getOrCreate(id contexts.Identity) *contexts.Record {
	e.t.Helper()
	rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
	if err != nil {
		e.t.Fatalf("GetOrCreate(%v): %v", id, err)
	}
	return rec
}

func (e *env) exec(id contexts.Identity, code string) *contexts.ExecuteResult {
	e.t.Helper()
	res, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: code}, nil)
	if err != nil {
		e.t.Fatalf("Execute(%v, %q): %v", id, code, err)
	}
	return res
}

// record loads a record from the store, unscoped.
func (e *env) record(id string) *contexts.Record {
	e.t.Helper()
	contexts.Settle(e.m)
	r, err := e.store.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("store.Get(%s): %v", id, err)
	}
	return r
}

func (e *env) running(id string) bool {
	for _, r := range e.p.Running() {
		if r == id {
			return true
		}
	}
	return false
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 5*time.Second, cond)
}

func wantCategory(t *testing.T, err, cat error) {
	t.Helper()
	if !errors.Is(err, cat) {
		t.Fatalf("err = %v, want category %v", err, cat)
	}
}

// flakyStore wraps a store and fails every call while failing is set.
type flakyStore struct {
	contexts.Store
	failing atomic.Bool
	calls   atomic.Int64 // failed calls
}

var errStoreDown = fmt.Errorf("store is down: %w", errdefs.ErrUnavailable)

func (s *flakyStore) fail() error {
	if s.failing.Load() {
		s.calls.Add(1)
		return errStoreDown
	}
	return nil
}

func (s *flakyStore) Create(ctx context.Context, rec *contexts.Record) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.Create(ctx, rec)
}

func (s *flakyStore) Get(ctx context.Context, id string) (*contexts.Record, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, id)
}

func (s *flakyStore) GetActive(ctx context.Context, id contexts.Identity) (*contexts.Record, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.GetActive(ctx, id)
}

func (s *flakyStore) Update(ctx context.Context, rec *contexts.Record) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.Update(ctx, rec)
}

func (s *flakyStore) RecordExecution(ctx context.Context, id string, n int, dur time.Duration, now, exp time.Time) (*contexts.Record, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.RecordExecution(ctx, id, n, dur, now, exp)
}

func (s *flakyStore) Touch(ctx context.Context, id string, now, exp time.Time) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.Touch(ctx, id, now, exp)
}

func (s *flakyStore) Terminate(ctx context.Context, id string, r contexts.Reason, at time.Time, le string) (bool, error) {
	if err := s.fail(); err != nil {
		return false, err
	}
	return s.Store.Terminate(ctx, id, r, at, le)
}

func (s *flakyStore) ListExpired(ctx context.Context, cutoff time.Time, limit int) ([]*contexts.Record, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.ListExpired(ctx, cutoff, limit)
}

func (s *flakyStore) ListActive(ctx context.Context) ([]*contexts.Record, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.ListActive(ctx)
}

func (s *flakyStore) CountActive(ctx context.Context, tid, uid, cid string) (int, error) {
	if err := s.fail(); err != nil {
		return 0, err
	}
	return s.Store.CountActive(ctx, tid, uid, cid)
}

func (s *flakyStore) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, f)
}
