package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tools"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
}

// version answers the build's version, commit and schema version.
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Version)
}

// readyz answers Readiness: 200 when ready, else 503.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	status, body := s.Readiness(r.Context())
	if status != http.StatusOK && len(body.Waiting) > 0 && body.Checks["server"] == "" {
		// Waiting for work that ends (a template's first build): a state,
		// with when to look again, not a fault.
		w.Header().Set("Retry-After", "5")
		for _, c := range body.Checks {
			if c == "unavailable" {
				w.Header().Del("Retry-After")
			}
		}
	}
	writeJSON(w, status, body)
}

// Readiness runs every probe with a short deadline and adds the work the
// daemon reports (Config.Progress): the server is ready when every probe
// passes, nothing readiness waits for remains, and it is not shutting
// down. Probe errors are logged, not returned: they may carry DSNs or
// paths. The status is 200 when ready, else 503.
func (s *Server) Readiness(ctx context.Context) (int, api.Readiness) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	h := api.Readiness{Status: "ok", Checks: map[string]string{}}
	if s.draining.Load() {
		h.Status = "unavailable"
		h.Checks["server"] = "shutting down"
	}
	for name, check := range s.cfg.Ready {
		if err := check(ctx); err != nil {
			s.log.Warn("readiness check failed", slog.String("check", name), slog.String(logkey.Err, err.Error()))
			h.Checks[name] = "unavailable"
			h.Status = "unavailable"
			continue
		}
		h.Checks[name] = "ok"
	}
	if s.cfg.Progress != nil {
		s.cfg.Progress(&h)
		if len(h.Waiting) > 0 {
			h.Status = "unavailable"
		}
	}
	h.Ready = h.Status == "ok"
	if !h.Ready {
		return http.StatusServiceUnavailable, h
	}
	return http.StatusOK, h
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(api.OpenAPI)))
	_, _ = w.Write(api.OpenAPI)
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	request, err := callerRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.cfg.Tools.ExportFor(r.URL.Query().Get("format"), request)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// maxIDLen bounds caller-chosen ids (conversation, path, task).
const maxIDLen = 256

// callerRequest is the tools.Call.Request of r: the caller's request it
// names (api.HeaderCallerRequest), scoped to its tenant so that no tenant
// reaches another's; "" when it names none.
func callerRequest(r *http.Request) (string, error) {
	v := r.Header.Get(api.HeaderCallerRequest)
	if v == "" {
		return "", nil
	}
	if err := checkID(api.HeaderCallerRequest, v); err != nil {
		return "", err
	}
	return "v1:" + mustTenant(r).ID + ":" + v, nil
}

// userParam is the optional ?userId= of a route that names a conversation
// in its path or filters by one: the end user whose conversation it is
// ("" is no user).
func userParam(r *http.Request) (string, error) {
	v := r.URL.Query().Get("userId")
	return v, checkID("userId", v)
}

func checkID(field, v string) error {
	if len(v) > maxIDLen {
		return invalid("%s is longer than %d bytes", field, maxIDLen)
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return invalid("%s contains a control character", field)
		}
	}
	return nil
}

func (s *Server) callTool(w http.ResponseWriter, r *http.Request) {
	t := mustTenant(r)
	var req api.ToolRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, f := range []struct{ name, v string }{
		{"userId", req.UserID}, {"conversationId", req.ConversationID}, {"pathId", req.PathID}, {"taskId", req.TaskID},
	} {
		if err := checkID(f.name, f.v); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	id, _ := contexts.Resolve(t.ID, req.UserID, req.ConversationID, req.PathID, req.TaskID)
	args := req.Args
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	netPolicy, err := tools.NetworkPolicy(req.Network)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := contexts.CheckEnv(nil, req.Secrets); err != nil {
		s.writeError(w, r, err)
		return
	}
	request, err := callerRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	r = r.WithContext(contexts.WithSecrets(r.Context(), req.Secrets))
	call := tools.Call{Name: r.PathValue("name"), Identity: id, Args: args, Forced: true, Network: netPolicy, Request: request}
	if wantsNDJSON(r) {
		s.streamTool(w, r, call)
		return
	}
	res, err := s.cfg.Tools.Call(r.Context(), call, nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The result carries the identity (api.PathRef), so a caller that
	// sent no conversationId learns the generated one.
	writeJSON(w, http.StatusOK, res)
}

func wantsNDJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), api.ContentTypeNDJSON)
}

// streamTool answers a tool call as NDJSON: output events as they happen,
// each flushed, then one final (or error) event. The status line waits for
// the first event, so a call that fails before any output still gets its
// proper 4xx.
func (s *Server) streamTool(w http.ResponseWriter, r *http.Request, call tools.Call) {
	sw := &eventWriter{w: w, rc: http.NewResponseController(w)}
	out := func(ev agent.OutputEvent) {
		switch ev.Stream {
		case agent.Stdout, agent.Stderr:
			sw.send(api.Event{Type: ev.Stream, Data: ev.Data})
		case agent.Result:
			if ev.Result != nil {
				b, err := json.Marshal(api.RichResult(*ev.Result))
				if err == nil {
					sw.send(api.Event{Type: api.EventResult, Result: b})
				}
			}
		}
	}
	res, err := s.cfg.Tools.Call(r.Context(), call, out)
	var body json.RawMessage
	if err == nil {
		if body, err = json.Marshal(res); err != nil {
			err = fmt.Errorf("encode tool result: %w", err)
		}
	}
	if err != nil {
		_, e := s.errorBody(r, err)
		if !sw.close(&api.Event{Type: api.EventError, Code: e.Code, Message: e.Message}) {
			writeJSON(w, errorStatus(err), e)
		}
		return
	}
	sw.send(api.Event{Type: api.EventFinal, Result: body})
	sw.close(nil)
}

// eventWriter serializes NDJSON events from the sandbox's output callback
// and the handler.
type eventWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex
	started bool // header written
	closed  bool // no more events
}

// writeWait bounds one event write, so a stalled client cannot hold the
// sandbox connection that feeds the output callback.
const writeWait = 30 * time.Second

func (e *eventWriter) send(ev api.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.writeLocked(ev)
	}
}

// writeLocked writes one event, starting the response on the first.
// e.mu must be held.
func (e *eventWriter) writeLocked(ev api.Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	b = append(b, '\n')
	if !e.started {
		e.started = true
		h := e.w.Header()
		h.Set("Content-Type", api.ContentTypeNDJSON)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		e.w.WriteHeader(http.StatusOK)
	}
	_ = e.rc.SetWriteDeadline(time.Now().Add(writeWait))
	if _, err := e.w.Write(b); err != nil {
		e.closed = true
		return
	}
	_ = e.rc.Flush()
}

// close ends the stream: later events are dropped. When the stream has
// started, last (if any) is written as its final line. close reports
// whether the stream had started; if not, the caller still owns the
// response.
func (e *eventWriter) close(last *api.Event) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	started := e.started
	if started && last != nil && !e.closed {
		e.writeLocked(*last)
	}
	e.closed = true
	return started
}

var validStates = map[contexts.State]bool{
	contexts.StateCreating: true, contexts.StateReady: true,
	contexts.StateTerminated: true, contexts.StateError: true,
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	t := mustTenant(r)
	q := r.URL.Query()
	user, err := userParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f := contexts.Filter{
		TenantID:       t.ID,
		UserID:         user,
		ConversationID: q.Get("conversationId"),
		PathID:         q.Get("pathId"),
		After:          q.Get("after"),
		Limit:          100,
	}
	if v := q.Get("status"); v != "" {
		for _, st := range strings.Split(v, ",") {
			st := contexts.State(strings.TrimSpace(st))
			if st == "active" {
				f.States = append(f.States, contexts.StateCreating, contexts.StateReady)
				continue
			}
			if !validStates[st] {
				s.writeError(w, r, invalid("unknown status %q (creating, ready, terminated, error, active)", st))
				return
			}
			f.States = append(f.States, st)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, invalid("limit must be an integer from 1 to 1000"))
			return
		}
		f.Limit = n
	}
	recs, err := s.cfg.Contexts.List(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ContextList{Contexts: make([]api.Context, len(recs))}
	for i, rec := range recs {
		out.Contexts[i] = contextOf(rec)
	}
	if len(recs) == f.Limit {
		out.Next = recs[len(recs)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getContext(w http.ResponseWriter, r *http.Request) {
	rec, err := s.cfg.Contexts.Get(r.Context(), mustTenant(r).ID, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, contextOf(rec))
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Contexts.Terminate(r.Context(), mustTenant(r).ID, r.PathValue("id"), contexts.ReasonManual); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// suspendContext suspends a context to disk: its files kept as an image,
// its sandbox and memory freed; the next call wakes it (docs/state.md,
// "Suspend to disk"). Its expiry stays: it still ends on its TTL.
func (s *Server) suspendContext(w http.ResponseWriter, r *http.Request) {
	rec, err := s.cfg.Contexts.Suspend(r.Context(), mustTenant(r).ID, r.PathValue("id"), 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, contextOf(rec))
}

// endConversation ends every path of a conversation (reason deleted).
func (s *Server) endConversation(w http.ResponseWriter, r *http.Request) {
	conv := r.PathValue("conversationId")
	if err := checkID("conversationId", conv); err != nil {
		s.writeError(w, r, err)
		return
	}
	user, err := userParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.cfg.Contexts.EndConversation(r.Context(), mustTenant(r).ID, user, conv)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ConversationEnded{UserID: user, ConversationID: conv, Terminated: n})
}

var pathEventTypes = map[string]bool{
	api.PathBranched: true, api.PathEdited: true, api.PathMerged: true,
	api.PathDeleted: true, api.PathArchived: true,
}

func (s *Server) pathEvent(w http.ResponseWriter, r *http.Request) {
	t := mustTenant(r)
	var ev api.PathEvent
	if err := s.decodeJSON(w, r, &ev); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !pathEventTypes[ev.Type] {
		s.writeError(w, r, invalid("unknown path event type %q (branched, edited, merged, deleted, archived)", ev.Type))
		return
	}
	user, err := userParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := contexts.Identity{TenantID: t.ID, UserID: user, ConversationID: r.PathValue("conversationId"), PathID: r.PathValue("pathId")}
	for _, f := range []struct{ name, v string }{
		{"conversationId", id.ConversationID}, {"pathId", id.PathID},
		{"sourcePathId", ev.SourcePathID}, {"targetPathId", ev.TargetPathID},
	} {
		if err := checkID(f.name, f.v); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if err := s.cfg.Contexts.PathEvent(r.Context(), id, contexts.PathEvent{Type: ev.Type, SourcePathID: ev.SourcePathID, TargetPathID: ev.TargetPathID}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// whoami answers the tenant of the request's key.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	t := mustTenant(r)
	writeJSON(w, http.StatusOK, api.TenantInfo{ID: t.ID, Name: t.Name, Admin: t.Admin})
}

// sessionMetrics answers the counters of the caller's sessions. An
// admin tenant's key counts every tenant's without ?tenant=, or the named
// tenant's; any other key counts its own tenant's, and naming another
// tenant is 403 (the counts say how busy a tenant is).
func (s *Server) sessionMetrics(w http.ResponseWriter, r *http.Request) {
	t := mustTenant(r)
	q := r.URL.Query()
	want, named := q.Get("tenant"), q.Has("tenant")
	if err := checkID("tenant", want); err != nil {
		s.writeError(w, r, err)
		return
	}
	if named && want == "" {
		s.writeError(w, r, invalid("tenant must name a tenant (leave it out for your own)"))
		return
	}
	var out api.SessionMetrics
	switch {
	case named && want != t.ID && !t.Admin:
		s.writeError(w, r, fmt.Errorf("only an admin tenant's key may read another tenant's session metrics: %w", errdefs.ErrPermissionDenied))
		return
	case !named && t.Admin:
		out = sessionMetricsOf(s.cfg.Contexts.Stats())
		out.Tenant = "*"
	case named:
		out = sessionMetricsOf(s.cfg.Contexts.TenantStats(want))
		out.Tenant = want
	default:
		out = sessionMetricsOf(s.cfg.Contexts.TenantStats(t.ID))
		out.Tenant = t.ID
	}
	// The warm pool belongs to no tenant: its size is the daemon's.
	out.PoolSize = s.cfg.Contexts.Stats().PoolSize
	writeJSON(w, http.StatusOK, out)
}

// sessionMetricsOf is the wire form of the manager's counters. Desktop
// sessions are the contexts on the desktop template (the E2B desktop SDK's
// and the desktop tools'); execution sessions are the rest, so the two add
// up to the totals.
func sessionMetricsOf(s contexts.Stats) api.SessionMetrics {
	stats := func(t contexts.TemplateStats) api.SessionStats {
		return api.SessionStats{ActiveSessions: t.Active, TotalCreated: t.TotalCreated, TotalReused: t.TotalReused,
			TotalCleaned: t.TotalCleaned, TotalTerminated: t.TotalTerminated, HealthCheckFailures: t.HealthCheckFailures}
	}
	total := stats(contexts.TemplateStats{Active: s.Active, TotalCreated: s.TotalCreated, TotalReused: s.TotalReused,
		TotalCleaned: s.TotalCleaned, TotalTerminated: s.TotalTerminated, HealthCheckFailures: s.HealthCheckFailures})
	desk := stats(s.PerTemplate[templates.Desktop])
	out := api.SessionMetrics{
		SessionStats: total,
		Execution: api.SessionStats{
			ActiveSessions: total.ActiveSessions - desk.ActiveSessions, TotalCreated: total.TotalCreated - desk.TotalCreated,
			TotalReused: total.TotalReused - desk.TotalReused, TotalCleaned: total.TotalCleaned - desk.TotalCleaned,
			TotalTerminated: total.TotalTerminated - desk.TotalTerminated, HealthCheckFailures: total.HealthCheckFailures - desk.HealthCheckFailures,
		},
		Desktop:  desk,
		Totals:   total,
		PoolSize: s.PoolSize, PoolHits: s.PoolHits, PoolMisses: s.PoolMisses,
		PerTemplate: make(map[string]api.SessionStats, len(s.PerTemplate)),
	}
	for name, t := range s.PerTemplate {
		out.PerTemplate[name] = stats(t)
	}
	return out
}

// listAudit returns the authenticated tenant's audit trail. The store
// filters by tenant (and, on Postgres, row-level security confines it)
// and by kind: the newest limit events of that kind.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Audit == nil {
		err := fmt.Errorf("this server keeps no audit trail: %w", errdefs.ErrUnavailable)
		s.writeError(w, r, errdefs.Public(err, "This server keeps no audit trail (its store has none); ask its operator to use a store that keeps one."))
		return
	}
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, invalid("limit must be an integer from 1 to 1000"))
			return
		}
		limit = n
	}
	evs, err := s.cfg.Audit(r.Context(), mustTenant(r).ID, q.Get("kind"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var kept []audit.Event
	for _, ev := range evs {
		kept = append(kept, s.guardAudit(r.Context(), ev))
	}
	out := api.AuditList{Events: auditEventsOf(kept)}
	writeJSON(w, http.StatusOK, out)
}

// auditUnguarded are the detail fields the daemon writes itself, as
// typed values, which the guard must not touch: the address a
// connection was dialled at or refused for (an IP address, which the
// guard redacts as personal data) is what the trail is for. Everything
// else may hold what a sandbox chose: the name it asked for or sent as
// SNI or Host, an error from inside it.
var auditUnguarded = map[string]bool{"addr": true}

// guardAudit returns ev with its detail values passed through the guard,
// as output of its tenant's context.
func (s *Server) guardAudit(ctx context.Context, ev audit.Event) audit.Event {
	if s.cfg.GuardText == nil || len(ev.Detail) == 0 {
		return ev
	}
	d := make(map[string]string, len(ev.Detail))
	for k, v := range ev.Detail {
		if !auditUnguarded[k] {
			v = s.cfg.GuardText(ctx, ev.TenantID, ev.ContextID, v)
		}
		d[k] = v
	}
	ev.Detail = d
	return ev
}
