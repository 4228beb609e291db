package guard

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// Span is an entity a Recognizer found: a type (TypePerson,
// TypeOrganization, TypeLocation) and byte offsets in its window.
type Span struct {
	Type       string
	Start, End int
}

// ModelInfo describes a loaded model for health output and metrics.
type ModelInfo struct {
	Name     string
	Bytes    int64 // heap the loaded weights take
	LoadTime time.Duration
}

// Recognizer is an entity model (guard/ner). The guard calls it only on
// windows around candidates its rules could not decide, from many
// goroutines at once.
type Recognizer interface {
	Recognize(window string) []Span
	Info() ModelInfo
}

// ModelStatus says whether the entity model is in use: its info, or why
// not (Config.ModelError, or no model configured, or a run that failed).
func (g *Guard) ModelStatus() (ModelInfo, error) {
	if g.model == nil {
		if g.modelErr != nil {
			return ModelInfo{}, g.modelErr
		}
		return ModelInfo{}, fmt.Errorf("no entity model configured: %w", errdefs.ErrUnavailable)
	}
	if n := g.modelPanics.Load(); n > 0 {
		return g.model.Info(), fmt.Errorf("entity model failed %d times; the rules judged those windows", n)
	}
	return g.model.Info(), nil
}

// recognize runs the model on one window. A model that panics leaves the
// window to the rules (the patterns and entity rules have run on it
// regardless): text is never let through unscanned.
func (g *Guard) recognize(window string) (spans []Span) {
	start, ok := g.budget.take()
	if !ok {
		return []Span{}
	}
	defer g.budget.spend(start)
	defer func() {
		if recover() != nil {
			g.modelPanics.Add(1)
			spans = []Span{}
		}
	}()
	spans = g.model.Recognize(window)
	if spans == nil {
		spans = []Span{}
	}
	return spans
}

// entitySetOf turns a list of entity types into a set; nil is all of them.
func entitySetOf(types []string) (entitySet, error) {
	if types == nil {
		return entAll, nil
	}
	var s entitySet
	for _, t := range types {
		b := entityBit(t)
		if b == 0 {
			return 0, fmt.Errorf("guard entity type %q: %w", t, errdefs.ErrInvalidArgument)
		}
		s |= b
	}
	return s, nil
}

// entsOf is the entity types tenantID's output is scanned for: the
// tenant's choice (tenant.Tenant.GuardEntities of the request's tenant,
// else Config.EntitiesFor), else Config.Entities. An unknown type in a
// tenant's choice is ignored (the others still apply).
func (g *Guard) entsOf(ctx context.Context, tenantID string) entitySet {
	var types []string
	if t, ok := tenant.From(ctx); ok && t.ID == tenantID {
		types = t.GuardEntities
	} else if g.entsFor != nil {
		types = g.entsFor(ctx, tenantID)
	}
	if types == nil {
		return g.ents
	}
	var s entitySet
	for _, t := range types {
		s |= entityBit(t)
	}
	return s
}
