// Package core is what the E2B edge's surfaces (control, envd, interp)
// share: the credentials of a call (API keys, access tokens, signed file
// URLs), the sandbox a call addresses and the manager calls confined to
// it, E2B's error shapes, and the end of a sandbox, which every surface
// hears of (OnForget) to let go of the state it keeps for it. It imports
// none of the surfaces and none of them imports another: they meet here.
package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// EnvdVersion is the envd version sandlot reports. 0.6.4 takes the SDKs'
// current code paths (octet-stream uploads, closeStdin), file metadata
// (0.6.2: X-Metadata-* headers, EntryInfo.metadata), watch events with
// their entry (0.6.3: includeEntry) and the opt-in to watching network
// mounts (0.6.4: allowNetworkMounts), which changes nothing here: a
// sandlot sandbox has no network mounts, so every directory it can watch
// is watched with or without the flag, as envd watches a local one.
const EnvdVersion = "0.6.4"

// ClientID is reported as the sandbox's clientID.
const ClientID = "sandlot"

// Tenants resolves the credentials of E2B calls. *tenant.Authenticator
// implements it, with the cache every edge shares.
type Tenants interface {
	// Key returns the tenant of an API key (errdefs.ErrUnauthenticated
	// for a missing, malformed or unknown key).
	Key(ctx context.Context, key string) (*tenant.Tenant, error)
	// Tenant returns a tenant by id (errdefs.ErrNotFound when it was
	// deleted). Access tokens name the tenant's key generation and
	// creation time, and a token is honoured only while both still match:
	// rotating the key or deleting the tenant revokes it.
	Tenant(ctx context.Context, id string) (*tenant.Tenant, error)
}

var _ Tenants = (*tenant.Authenticator)(nil)

// Config configures an Edge. Manager and Tenants are required; the rest
// are as the facade's Config documents them, defaults applied.
type Config struct {
	Manager  Manager
	Tenants  Tenants
	Secret   []byte        // signs access tokens
	TokenTTL time.Duration // an access token's life
	// Admit, when set, admits one request of an authenticated tenant.
	Admit func(ctx context.Context, tenantID string) (release func(), err error)
	// Clock dates tokens and metric samples; nil: time.Now.
	Clock  func() time.Time
	Domain string // of sandbox ports (<port>-<sandboxId>.<domain>); "": none
	Logger *slog.Logger
}

// Edge is the state and the services the surfaces share. It is safe for
// concurrent use.
type Edge struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// signers holds the envd tokens issued per sandbox, newest last, to
	// check signed file URLs (signed.go).
	signers map[string][]string
	// ended remembers the sandboxes the manager ended (End), the oldest
	// forgotten first past maxEnded.
	ended      map[string]bool
	endedOrder []string
	// forgets and pauses are the surfaces' functions told of a sandbox
	// that ended (OnForget) or paused (OnPause).
	forgets []func(sid string)
	pauses  []func(sid string)
}

// New returns an Edge. It hears of every context the manager ends
// (Manager.OnTerminated) for as long as the manager lives.
func New(cfg Config) *Edge {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	e := &Edge{cfg: cfg, log: cfg.Logger, signers: map[string][]string{}, ended: map[string]bool{}}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Manager != nil {
		cfg.Manager.OnTerminated(func(ctx context.Context, ev contexts.Termination) { e.End(ev.ContextID) })
	}
	return e
}

// Manager is the context manager.
func (e *Edge) Manager() Manager { return e.cfg.Manager }

// Logger is the edge's logger.
func (e *Edge) Logger() *slog.Logger { return e.log }

// Now is Config.Clock: the time tokens and metric samples are dated by. A
// sandbox's end is judged by the manager's clock instead (Live).
func (e *Edge) Now() time.Time { return e.cfg.Clock() }

// Domain is Config.Domain for the wire (null when unset).
func (e *Edge) Domain() *string {
	if e.cfg.Domain == "" {
		return nil
	}
	d := e.cfg.Domain
	return &d
}

// Ref is the sandbox a sandbox call addresses, as its credentials found
// it.
type Ref struct {
	TenantID string
	Tenant   *tenant.Tenant
	Rec      *contexts.Record
}

type refKey struct{}

// WithRef returns ctx carrying ref, for the surface serving the call.
func WithRef(ctx context.Context, ref *Ref) context.Context {
	return context.WithValue(ctx, refKey{}, ref)
}

// RefFrom returns the Ref WithRef put in ctx.
func RefFrom(ctx context.Context) *Ref {
	r, _ := ctx.Value(refKey{}).(*Ref)
	return r
}

// NotFound is E2B's answer for a sandbox that is not there (or not the
// caller's).
func NotFound(id string) error {
	return fmt.Errorf("sandbox %q doesn't exist or you don't have access to it: %w", id, errdefs.ErrNotFound)
}

// Active loads the active record of sandbox id, or a not_found error. A
// sandbox past its end (endAt) is gone though the cleanup loop may not
// have ended it yet, as on E2B; one that pauses at its end is paused
// then.
func (e *Edge) Active(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	return e.active(ctx, tenantID, id, e.cfg.Manager.Get)
}

// active is Active with the record read by get.
func (e *Edge) active(ctx context.Context, tenantID, id string, get func(context.Context, string, string) (*contexts.Record, error)) (*contexts.Record, error) {
	m := e.cfg.Manager
	rec, err := get(ctx, tenantID, id)
	if err == nil && e.AutoPausing(rec) {
		rec, err = m.AutoPause(ctx, tenantID, id)
	}
	if err == nil && !e.Live(rec) {
		err = errdefs.ErrNotFound
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, NotFound(id)
	}
	return rec, err
}

// Live reports whether rec is a running sandbox: active and before its end
// (by the manager's clock).
func (e *Edge) Live(rec *contexts.Record) bool {
	return rec.State.Active() && rec.ExpiresAt.After(e.cfg.Manager.Now())
}

// AutoPausing reports a sandbox that pauses at its timeout and whose
// timeout passed by the manager's clock, not paused yet (the manager's
// cleanup loop would pause it within its interval; a call that sees it
// first does).
func (e *Edge) AutoPausing(rec *contexts.Record) bool {
	return rec.AutoPause > 0 && !rec.Paused() && rec.State.Active() && !rec.ExpiresAt.After(e.cfg.Manager.Now())
}

// Use runs fn with the guarded sandbox of ref's context, never a fresh one
// (CreateOptions.ContextID). When that context is no longer live (killed,
// expired, its sandbox lost) it fails with unavailable, which the SDKs
// read as "sandbox not running", as E2B's edge answers.
func (e *Edge) Use(ctx context.Context, ref *Ref, fn func(ctx context.Context, sb contexts.Sandbox) error) error {
	called := false
	err := e.cfg.Manager.Use(ctx, ref.Rec.Identity, CreateOptions{ContextID: ref.Rec.ID}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		called = true
		if rec.ID != ref.Rec.ID {
			return SandboxGone(ref.Rec.ID)
		}
		return fn(ctx, sb)
	})
	if err != nil && !called && errors.Is(err, errdefs.ErrNotFound) {
		return SandboxGone(ref.Rec.ID)
	}
	return err
}

// SandboxGone is the error of a call on a sandbox that ended under it.
func SandboxGone(id string) error {
	return fmt.Errorf("sandbox %s is not running anymore: %w", id, errdefs.ErrUnavailable)
}

// GoneUnder reports whether ref's sandbox is no longer active (killed or
// expired under a call), and forgets it then.
func (e *Edge) GoneUnder(ctx context.Context, ref *Ref) bool {
	_, err := e.Active(context.WithoutCancel(ctx), ref.TenantID, ref.Rec.ID)
	if errors.Is(err, errdefs.ErrNotFound) {
		e.Forget(ref.Rec.ID)
		return true
	}
	return false
}

// forgetEnded forgets sandbox id when it is tenantID's and its context
// ended: one another daemon on the store ended, which this daemon's
// manager does not tell of. Another tenant's sandbox, or an id that names
// none, is left alone: a call cannot make the edge drop what it keeps of a
// sandbox that is not the caller's.
func (e *Edge) forgetEnded(ctx context.Context, tenantID, id string) {
	if rec, err := e.cfg.Manager.Get(ctx, tenantID, id); err == nil && !rec.State.Active() {
		e.Forget(id)
	}
}

// OnForget adds fn to the functions told of a sandbox whose state the
// surfaces drop (Forget). Surfaces add theirs when they are built.
func (e *Edge) OnForget(fn func(sid string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forgets = append(e.forgets, fn)
}

// OnPause adds fn to the functions told of a sandbox that paused.
func (e *Edge) OnPause(fn func(sid string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pauses = append(e.pauses, fn)
}

// maxEnded bounds the sandboxes End remembers. A call under way when its
// sandbox ended keeps nothing of it after (Ended) unless it outlasts that
// many more ends; what such a call would keep goes when a later call finds
// the sandbox gone (Forget).
const maxEnded = 10_000

// End is the end of sandbox sid's context, whatever ended it (the
// manager's termination hook): every surface drops what it keeps of the
// sandbox now, and keeps nothing of it again (Ended).
func (e *Edge) End(sid string) {
	e.mu.Lock()
	if !e.ended[sid] {
		e.ended[sid] = true
		e.endedOrder = append(e.endedOrder, sid)
		if len(e.endedOrder) > maxEnded {
			delete(e.ended, e.endedOrder[0])
			e.endedOrder = e.endedOrder[1:] // append copies the live ones when it grows
		}
	}
	e.mu.Unlock()
	e.Forget(sid)
}

// Ended reports whether sandbox sid's context ended (End). A surface
// asks it, under its own lock, before it keeps something of a sandbox: a
// call that was under way when the sandbox ended keeps nothing after.
func (e *Edge) Ended(sid string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended[sid]
}

// Forget drops what the edge and every surface keep of sandbox sid, which
// is gone. End calls it when the manager ends the context; the edge also
// calls it when a call finds a sandbox gone that this daemon's manager did
// not end (another daemon sharing the store did).
func (e *Edge) Forget(sid string) {
	e.mu.Lock()
	delete(e.signers, sid)
	fns := slices.Clone(e.forgets)
	e.mu.Unlock()
	for _, fn := range fns {
		fn(sid)
	}
}

// Paused tells the surfaces that sandbox sid paused.
func (e *Edge) Paused(sid string) {
	e.mu.Lock()
	fns := slices.Clone(e.pauses)
	e.mu.Unlock()
	for _, fn := range fns {
		fn(sid)
	}
}

// Holds reports whether the edge keeps anything of sandbox sid (its
// tokens, for signed URLs): a sandbox that ended has nothing left.
func (e *Edge) Holds(sid string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.signers[sid]
	return ok
}
