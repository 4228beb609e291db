package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// Live is what the console's live routes use of *contexts.Manager: the
// feed of changed contexts and the TTL setter.
type Live interface {
	// Watch returns a watcher of tenantID's contexts ("" every tenant's)
	// and the function that stops it.
	Watch(tenantID string) (*contexts.Watcher, func())
	// SetTTL makes a context's TTL ttl from now (errdefs.ErrNotFound for
	// another tenant's).
	SetTTL(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error)
}

var _ Live = (*contexts.Manager)(nil)

// Bounds of the live routes.
const (
	// ssePing is how often an idle stream sends a comment, so proxies and
	// the browser see it alive.
	ssePing = 15 * time.Second
	// sseSnapshot bounds the contexts of one snapshot.
	sseSnapshot = 1000
	// maxTTL bounds PUT .../ttl (a day, as the tools' ttl).
	maxTTL = 24 * time.Hour
)

// contextEvents serves GET /v1/contexts/events: server-sent events of the
// caller's active contexts. The first event (snapshot) lists them; then
// one event (context) per context whose record changed, with its state
// (terminated and error are the last of a context). A tenant's key sees
// its tenant's contexts; an admin tenant's key sees every tenant's. Each
// change is read again through Contexts.Get under the stream's tenant, as
// GET /v1/contexts/{id} reads it, so the feed can show nothing that route
// would not.
//
// EventSource cannot send an Authorization header, so the console reads
// the stream with fetch; the key never travels in the URL.
func (s *Server) contextEvents(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Live == nil {
		s.writeError(w, r, errdefs.Public(fmt.Errorf("no live feed: %w", errdefs.ErrUnavailable), "This server has no live feed of contexts."))
		return
	}
	t := mustTenant(r)
	scope := t.ID
	if t.Admin {
		scope = ""
	}
	watcher, stop := s.cfg.Live.Watch(scope)
	defer stop()
	ctx := r.Context()
	snap, err := s.snapshot(ctx, scope)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, v any) bool {
		var buf bytes.Buffer
		buf.WriteString("event: " + event + "\ndata: ")
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return false
		}
		buf.WriteString("\n") // Encode ended the data line; this ends the event
		_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("snapshot", snap) {
		return
	}
	ping := time.NewTicker(ssePing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.drained:
			return
		case <-ping.C:
			_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
			if _, err := w.Write([]byte(": ping\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		case <-watcher.Ready():
			changes, resync := watcher.Take()
			if resync {
				if snap, err = s.snapshot(ctx, scope); err != nil || !send("snapshot", snap) {
					return
				}
				continue
			}
			for _, c := range changes {
				owner := t.ID
				if t.Admin {
					owner = c.TenantID
				}
				rec, err := s.cfg.Contexts.Get(ctx, owner, c.ContextID)
				if errors.Is(err, errdefs.ErrNotFound) {
					continue
				}
				if err != nil {
					return
				}
				if !send("context", api.ContextEvent{Context: contextOf(rec), ServerTime: time.Now().UTC()}) {
					return
				}
			}
		}
	}
}

// snapshot lists the active contexts of tenantID ("" every tenant's).
func (s *Server) snapshot(ctx context.Context, tenantID string) (api.ContextSnapshot, error) {
	if tenantID == "" {
		// The admin's stream: unscoped, as the system's reads are (the
		// request's context is scoped to the admin's own tenant).
		ctx = tenant.WithID(ctx, "")
	}
	recs, err := s.cfg.Contexts.List(ctx, contexts.Filter{TenantID: tenantID,
		States: []contexts.State{contexts.StateCreating, contexts.StateReady}, Limit: sseSnapshot})
	if err != nil {
		return api.ContextSnapshot{}, err
	}
	out := api.ContextSnapshot{Contexts: make([]api.Context, 0, len(recs)), ServerTime: time.Now().UTC()}
	for _, rec := range recs {
		if tenantID != "" && rec.TenantID != tenantID { // the store filtered; this is the second lock
			continue
		}
		out.Contexts = append(out.Contexts, contextOf(rec))
	}
	return out, nil
}

// setTTL serves PUT /v1/contexts/{id}/ttl: the context's TTL becomes
// ttlSeconds from now (the console's "extend").
func (s *Server) setTTL(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Live == nil {
		s.writeError(w, r, errdefs.Public(fmt.Errorf("no TTL setter: %w", errdefs.ErrUnavailable), "This server cannot set a context's TTL."))
		return
	}
	var req api.TTLRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.TTLSeconds < 1 || time.Duration(req.TTLSeconds)*time.Second > maxTTL {
		s.writeError(w, r, invalid("ttlSeconds must be from 1 to %d", int(maxTTL/time.Second)))
		return
	}
	rec, err := s.cfg.Live.SetTTL(r.Context(), mustTenant(r).ID, r.PathValue("id"), time.Duration(req.TTLSeconds)*time.Second)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, contextOf(rec))
}
