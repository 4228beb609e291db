package contexts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestUnknownTemplate: a template the manager does not know is not_found,
// before any record or sandbox is created.
func TestUnknownTemplate(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSizes: map[string]int{"data": 0}})
	_, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{Template: "nope"})
	wantCategory(t, err, errdefs.ErrNotFound)
	if err.Error() != "template nope not found" {
		t.Fatalf("err = %q", err)
	}
	if e.p.Created() != 0 {
		t.Fatalf("%d sandboxes created for an unknown template", e.p.Created())
	}
	if n, err := e.store.CountActive(e.ctx, "t1", "", ""); err != nil || n != 0 {
		t.Fatalf("active records %d, %v", n, err)
	}
	recs, err := e.store.List(e.ctx, contexts.Filter{TenantID: "t1"})
	if err != nil || len(recs) != 0 {
		t.Fatalf("records %+v, %v", recs, err)
	}
	// The default template, "" and the pooled templates exist.
	for i, tmpl := range []string{"", "default", "data"} {
		rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c"+string(rune('2'+i)), "main"), contexts.CreateOptions{Template: tmpl})
		if err != nil {
			t.Fatalf("template %q: %v", tmpl, err)
		}
		if want := map[string]string{"": "default"}[tmpl]; rec.Template != tmpl && rec.Template != want {
			t.Fatalf("template %q: record template %q", tmpl, rec.Template)
		}
	}
	// Config.Templates replaces the default set.
	e2 := newEnv(t, contexts.Config{Templates: []string{"default", "gpu"}})
	if _, err := e2.m.GetOrCreate(e2.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{Template: "gpu"}); err != nil {
		t.Fatal(err)
	}
	_, err = e2.m.GetOrCreate(e2.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{Template: "data"})
	wantCategory(t, err, errdefs.ErrNotFound)
}

// TestCreateOptionsID: a caller may choose the new context's id (a UUID).
func TestCreateOptionsID(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	const want = "0b7c5f0e-3f7e-4f43-9d0a-2d7c1b8a9e11"
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", want, "main"), contexts.CreateOptions{ID: want})
	if err != nil || rec.ID != want || e.record(want).ConversationID != want {
		t.Fatalf("record %+v, %v", rec, err)
	}
	_, err = e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{ID: "nope"})
	wantCategory(t, err, errdefs.ErrInvalidArgument)
}

// TestContextIDNeverCreates: a call confined to a context id fails with
// not_found once that context has ended (expired, terminated) instead of
// running in a fresh context.
func TestContextIDNeverCreates(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: time.Minute})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	run := func() error {
		_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1", ContextID: rec.ID}, nil)
		return err
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute) // expired, cleanup has not run
	wantCategory(t, run(), errdefs.ErrNotFound)
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{ContextID: rec.ID}, func(context.Context, *contexts.Record, contexts.Sandbox) error { return nil })
	wantCategory(t, err, errdefs.ErrNotFound)
	if got := e.p.Created(); got != 1 {
		t.Fatalf("%d sandboxes created, want 1 (no fresh context behind the caller)", got)
	}
	// Without ContextID the identity gets a fresh context, as before; a
	// call confined to the old id still fails.
	fresh := e.getOrCreate(id)
	if fresh.ID == rec.ID {
		t.Fatal("expired context reused")
	}
	wantCategory(t, run(), errdefs.ErrNotFound)
	if _, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1", ContextID: fresh.ID}, nil); err != nil {
		t.Fatal(err)
	}
}

// langCatalog is a Catalog of two templates: "default", whose languages
// are known, and "custom", whose are not (every language offered).
type langCatalog struct{}

func (langCatalog) ResolveTemplate(ctx context.Context, _, ref string) (contexts.TemplateInfo, error) {
	if ref == "" {
		ref = "default"
	}
	return langCatalog{}.TemplateInfo(ctx, ref)
}

func (langCatalog) TemplateInfo(_ context.Context, id string) (contexts.TemplateInfo, error) {
	switch id {
	case "default":
		return contexts.TemplateInfo{ID: id, Name: id, Languages: []string{"python", "bash"}, Public: true}, nil
	case "custom":
		return contexts.TemplateInfo{ID: id, Name: id, Public: true}, nil
	}
	return contexts.TemplateInfo{}, errdefs.ErrNotFound
}

// TestLanguageRefusedBeforeCreate: a first call in a language its
// template does not offer is invalid_argument before a record or a
// sandbox exists: nothing is left running for the context's TTL (a
// sandbox used to be made, and then the kernel was found missing). A
// template whose languages are unknown still creates.
func TestLanguageRefusedBeforeCreate(t *testing.T) {
	e := newEnv(t, contexts.Config{Catalog: langCatalog{}, PoolSize: -1})
	id := ident("t1", "c1", "main")
	_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "r", Code: "1"}, nil)
	wantCategory(t, err, errdefs.ErrInvalidArgument)
	if !errors.Is(err, contexts.ErrLanguageNotOffered) {
		t.Fatalf("a run refused for its language is not marked so for the edges: %v", err)
	}
	if msg := errdefs.PublicMessage(err); msg != `template "default" has no r kernel (it offers python, bash); use one of those, or a template that has r (the built-in code-interpreter template has R and Java)` {
		t.Errorf("message %q", msg)
	}
	if n := e.p.Created(); n != 0 {
		t.Fatalf("%d sandboxes created for a refused call", n)
	}
	recs, err := e.store.List(e.ctx, contexts.Filter{TenantID: "t1"})
	if err != nil || len(recs) != 0 {
		t.Fatalf("records after a refused call: %+v, %v", recs, err)
	}
	if _, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Execute(e.ctx, ident("t1", "c2", "main"), contexts.ExecuteRequest{Language: "r", Code: "1", Template: "custom"}, nil); err != nil {
		t.Fatalf("a template of unknown languages: %v", err)
	}
}
