package tenant

import "context"

// ctxKey is the one context key of a request's tenant.
type ctxKey struct{}

// scope is what ctxKey holds: the id a context is scoped to and, when a
// request authenticated, the tenant itself.
type scope struct {
	id string
	t  *Tenant // nil: scoped by id only (system work)
}

// With returns ctx carrying the authenticated tenant t: stores scope their
// statements to t.ID, and the guard applies t.GuardMode without a lookup.
func With(ctx context.Context, t *Tenant) context.Context {
	return context.WithValue(ctx, ctxKey{}, scope{id: t.ID, t: t})
}

// From returns the tenant a request authenticated as (With), if any.
func From(ctx context.Context) (*Tenant, bool) {
	s, ok := ctx.Value(ctxKey{}).(scope)
	return s.t, ok && s.t != nil
}

// WithID returns ctx scoped to tenant id. Stores with row-level security
// apply it to every statement. A ctx that already carries the
// authenticated tenant of that id is returned unchanged, so scoping a
// request's context again keeps its tenant.
func WithID(ctx context.Context, id string) context.Context {
	if s, ok := ctx.Value(ctxKey{}).(scope); ok && s.id == id {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, scope{id: id})
}

// FromContext returns the tenant id ctx is scoped to, if any.
func FromContext(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(ctxKey{}).(scope)
	return s.id, ok && s.id != ""
}
