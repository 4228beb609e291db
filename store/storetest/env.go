package storetest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/internal/seal"
	"github.com/sandlot/sandlot/tenant"
)

// testContextEnv: the environment a create gave a context (Record.Env)
// comes back from every read, is written by Create only (an Update with
// another or none leaves it), and another tenant does not read it.
func testContextEnv(t *testing.T, s store.Backend) {
	bg := context.Background()
	ctxA, ctxB := tenant.WithID(bg, "A"), tenant.WithID(bg, "B")
	env := map[string]string{"API_TOKEN": "tok-env-0123456789", "MODE": "blue"}
	rec := newRec(ident("A", "env", "main"))
	rec.State, rec.SandboxID, rec.Env = contexts.StateReady, "sb-1", env
	if err := s.Create(ctxA, rec); err != nil {
		t.Fatal(err)
	}
	check := func(what string, got *contexts.Record, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := cmp.Diff(env, got.Env); d != "" {
			t.Fatalf("%s: env (-want +got):\n%s", what, d)
		}
	}
	got, err := s.Get(ctxA, rec.ID)
	check("Get", got, err)
	got, err = s.GetActive(bg, rec.Identity)
	check("GetActive", got, err)
	recs, err := s.ListActive(bg)
	if err != nil || len(recs) != 1 {
		t.Fatalf("ListActive: %d records, %v", len(recs), err)
	}
	check("ListActive", recs[0], nil)
	got, err = s.RecordExecution(ctxA, rec.ID, 1, time.Second, base.Add(time.Minute), base.Add(31*time.Minute))
	check("RecordExecution", got, err)

	upd := mustGet(t, s, rec.ID)
	upd.Env = map[string]string{"API_TOKEN": "replaced"}
	if err := s.Update(ctxA, upd); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctxA, rec.ID)
	check("Get after an Update with another env", got, err)
	upd.Env = nil
	if err := s.Update(ctxA, upd); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctxA, rec.ID)
	check("Get after an Update without env", got, err)

	_, err = s.Get(ctxB, rec.ID)
	wantErr(t, "Get another tenant's context with env", err, errdefs.ErrNotFound)

	plain := mustCreate(t, s, newRec(ident("A", "noenv", "main")))
	if got := mustGet(t, s, plain.ID); got.Env != nil {
		t.Fatalf("env of a context created without one: %v", got.Env)
	}
}

// ContextEnvAtRest: a context's environment is not in the database as
// given but sealed, under additional data that ties it to its row (a value
// copied to another context's row does not open); a store opened without
// a key reads the record without it and stores none; another key is
// seal.ErrWrongKey. raw returns the env column of context id as stored;
// set writes it.
func ContextEnvAtRest(t *testing.T, open func(t *testing.T, key []byte) (store.Backend, error), raw func(t *testing.T, id string) string, set func(t *testing.T, id, v string)) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{0x5a}, seal.KeySize)
	s, err := open(t, key)
	if err != nil {
		t.Fatal(err)
	}
	const value = "sk-live-EnvAtRest0123456789"
	a := newRec(ident("T", "env-a", "main"))
	a.Env = map[string]string{"OPENAI_API_KEY": value}
	mustCreate(t, s, a)
	b := mustCreate(t, s, newRec(ident("T", "env-b", "main")))
	b.Env = map[string]string{"OTHER": "x"}
	stored := raw(t, a.ID)
	if !seal.Sealed(stored) || strings.Contains(stored, value) || strings.Contains(stored, "OPENAI_API_KEY") {
		t.Fatalf("stored env %q: want it sealed", stored)
	}
	if got := mustGet(t, s, a.ID); got.Env["OPENAI_API_KEY"] != value {
		t.Fatalf("env read back: %v", got.Env)
	}
	// Copied to another context's row: it does not open there.
	set(t, b.ID, stored)
	if _, err := s.Get(ctx, b.ID); !errors.Is(err, seal.ErrWrongKey) {
		t.Fatalf("Get of a row holding another context's sealed env: %v, want ErrWrongKey", err)
	}
	set(t, b.ID, "")
	s.Close()

	// Another key: the record's read fails and says why.
	other, err := open(t, bytes.Repeat([]byte{0xa5}, seal.KeySize))
	if err == nil {
		if _, err := other.Get(ctx, a.ID); !errors.Is(err, seal.ErrWrongKey) {
			t.Errorf("Get under another key: %v, want ErrWrongKey", err)
		}
		other.Close()
	}

	// No key: the record without its env; a new one stores none.
	s, err = open(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := mustGet(t, s, a.ID); got.Env != nil {
		t.Fatalf("env read without a key: %v", got.Env)
	}
	c := newRec(ident("T", "env-c", "main"))
	c.Env = map[string]string{"OPENAI_API_KEY": value}
	mustCreate(t, s, c)
	if v := raw(t, c.ID); v != "" {
		t.Fatalf("env stored by a store without a key: %q, want none", v)
	}
}
