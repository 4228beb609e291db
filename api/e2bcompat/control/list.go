package control

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
)

// maxListScan bounds the records one list call reads: E2B sorts the whole
// result by start time before paging, so a page needs the tenant's whole
// matching set (at most the manager's per-tenant limit of active contexts
// in practice).
const maxListScan = 10_000

// listQuery is a parsed GET /v2/sandboxes (or v1 /sandboxes) query.
type listQuery struct {
	filter       contexts.Filter
	states       map[string]bool // the states asked for (running, paused); nil: both
	template     string          // the templateID asked for; "": any
	startedAfter time.Time       // zero: any
	desc         bool            // order by start time, newest first (E2B's default)
	limit        int
	after        *listCursor
}

// listCursor is the position a nextToken names: the last item of the
// previous page in the list's order.
type listCursor struct {
	started int64 // unix nanoseconds
	id      string
}

func (c listCursor) String() string { return strconv.FormatInt(c.started, 10) + "." + c.id }

func parseCursor(s string) (*listCursor, error) {
	ns, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, fmt.Errorf("nextToken is not one this server issued: %w", errdefs.ErrInvalidArgument)
	}
	return &listCursor{started: n, id: id}, nil
}

// parseList parses the list query: metadata is "k=v&k2=v2" with keys and
// values URL-encoded once more (as the SDKs send it); state, template,
// startedAfter (RFC 3339), order (asc, desc), limit and nextToken.
func parseList(r *http.Request, tenantID string) (listQuery, error) {
	q := r.URL.Query()
	lq := listQuery{desc: true, limit: maxListLimit}
	f := contexts.Filter{TenantID: tenantID, States: []contexts.State{contexts.StateCreating, contexts.StateReady}}
	if m := q.Get("metadata"); m != "" {
		pairs, err := url.ParseQuery(m)
		if err != nil {
			return lq, fmt.Errorf("metadata filter: %w", errdefs.ErrInvalidArgument)
		}
		f.Metadata = map[string]string{}
		for k, vs := range pairs {
			key, err1 := url.QueryUnescape(k)
			val, err2 := url.QueryUnescape(vs[len(vs)-1])
			if err1 != nil || err2 != nil {
				return lq, fmt.Errorf("metadata filter: %w", errdefs.ErrInvalidArgument)
			}
			if strings.HasPrefix(key, contexts.ReservedPrefix) {
				continue // no caller's metadata has one: not a filter
			}
			f.Metadata[key] = val
		}
	}
	identityFilter(&f)
	lq.template = q.Get("template")
	if s := q["state"]; len(s) > 0 {
		lq.states = map[string]bool{}
		for _, st := range strings.Split(strings.Join(s, ","), ",") {
			lq.states[strings.TrimSpace(st)] = true
		}
	}
	if s := q.Get("startedAfter"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return lq, fmt.Errorf("startedAfter must be an RFC 3339 time: %w", errdefs.ErrInvalidArgument)
		}
		lq.startedAfter = t
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.desc = false
	default:
		return lq, fmt.Errorf("order must be asc or desc: %w", errdefs.ErrInvalidArgument)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return lq, fmt.Errorf("limit must be a positive integer: %w", errdefs.ErrInvalidArgument)
		}
		lq.limit = min(n, maxListLimit)
	}
	if t := q.Get("nextToken"); t != "" {
		c, err := parseCursor(t)
		if err != nil {
			return lq, err
		}
		lq.after = c
	}
	lq.filter = f
	return lq, nil
}

// user, conversation and path are shown as metadata when the caller set
// them; filtering on them maps to the identity columns.
func identityFilter(f *contexts.Filter) {
	if v, ok := f.Metadata[MetaUser]; ok {
		f.UserID, f.ByUser = v, true
		delete(f.Metadata, MetaUser)
	}
	if v, ok := f.Metadata[MetaConversation]; ok {
		f.ConversationID = v
		delete(f.Metadata, MetaConversation)
	}
	if v, ok := f.Metadata[MetaPath]; ok {
		f.PathID = v
		delete(f.Metadata, MetaPath)
	}
}

// matching returns the live records of lq in its order.
func (h *Handler) matching(r *http.Request, lq listQuery) ([]*contexts.Record, error) {
	f := lq.filter
	f.Limit = maxListLimit
	var out []*contexts.Record
	for scanned := 0; scanned < maxListScan; {
		recs, err := h.m.List(r.Context(), f)
		if err != nil {
			return nil, err
		}
		scanned += len(recs)
		for _, rec := range recs {
			if h.edge.AutoPausing(rec) {
				if cur, err := h.m.AutoPause(r.Context(), rec.TenantID, rec.ID); err == nil {
					rec = cur
				}
			}
			if h.edge.Live(rec) && !rec.CreatedAt.Before(lq.startedAfter) && (lq.states == nil || lq.states[stateOf(rec)]) &&
				(lq.template == "" || templateOf(rec) == lq.template) {
				out = append(out, rec)
			}
		}
		if len(recs) < f.Limit {
			break
		}
		f.After = recs[len(recs)-1].ID
	}
	slices.SortFunc(out, func(a, b *contexts.Record) int {
		c := a.CreatedAt.Compare(b.CreatedAt)
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if lq.desc {
			c = -c
		}
		return c
	})
	return out, nil
}

// afterCursor drops the records up to and including the cursor's.
func afterCursor(recs []*contexts.Record, c *listCursor, desc bool) []*contexts.Record {
	if c == nil {
		return recs
	}
	for i, rec := range recs {
		cmp := rec.CreatedAt.UnixNano() - c.started
		beyond := cmp > 0 || (cmp == 0 && rec.ID > c.id)
		if desc {
			beyond = cmp < 0 || (cmp == 0 && rec.ID < c.id)
		}
		if beyond {
			return recs[i:]
		}
	}
	return nil
}

// list is GET /v2/sandboxes: one page in start-time order, the next
// page's token in X-Next-Token (absent on the last page).
func (h *Handler) list(w http.ResponseWriter, r *http.Request, tenantID string) {
	lq, err := parseList(r, tenantID)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	recs, err := h.matching(r, lq)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	recs = afterCursor(recs, lq.after, lq.desc)
	if len(recs) > lq.limit {
		recs = recs[:lq.limit]
		last := recs[len(recs)-1]
		w.Header().Set(e2bwire.HeaderNextToken, listCursor{started: last.CreatedAt.UnixNano(), id: last.ID}.String())
	}
	h.writeDetails(w, r, tenantID, recs)
}

// listAll is the v1 list: every running sandbox, no paging.
func (h *Handler) listAll(w http.ResponseWriter, r *http.Request, tenantID string) {
	lq, err := parseList(r, tenantID)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	lq.states = map[string]bool{"running": true}
	recs, err := h.matching(r, lq)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	h.writeDetails(w, r, tenantID, recs)
}

func (h *Handler) writeDetails(w http.ResponseWriter, r *http.Request, tenantID string, recs []*contexts.Record) {
	out := []detailBody{}
	for _, rec := range recs {
		d, _ := h.detail(r.Context(), tenantID, rec, false) // no token: no error
		out = append(out, d)
	}
	core.WriteJSON(w, http.StatusOK, out)
}
