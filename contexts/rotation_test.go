package contexts_test

import (
	"testing"

	"github.com/sandlot/sandlot/contexts"
)

// TestRotationOptOut: a context created with MaxExecutions < 0 is never
// rotated, not even after a restart whose config limit it is far over.
func TestRotationOptOut(t *testing.T) {
	e1 := newEnv(t, contexts.Config{MaxExecutionsPerContext: 2})
	id := ident("t1", "c1", "main")
	rec, err := e1.m.GetOrCreate(e1.ctx, id, contexts.CreateOptions{MaxExecutions: -1})
	if err != nil {
		t.Fatal(err)
	}
	e1.exec(id, "x = 1")
	for range 5 {
		if res := e1.exec(id, "print(x)"); res.ContextID != rec.ID || res.Stdout != "1\n" {
			t.Fatalf("opted-out context rotated: %+v", res)
		}
	}
	e1.m.Close(e1.ctx)
	e2 := e1.second(contexts.Config{MaxExecutionsPerContext: 2})
	if res := e2.exec(id, "print(x)"); res.ContextID != rec.ID || res.Stdout != "1\n" {
		t.Fatalf("opted-out context rotated after a restart: %+v", res)
	}
	if r := e2.record(rec.ID); r.State != contexts.StateReady || r.ExecutionCount != 7 {
		t.Fatalf("record = %+v", r)
	}
	// Other contexts of the same manager still rotate at the config limit.
	other := ident("t1", "c2", "main")
	first := e2.exec(other, "1")
	e2.exec(other, "1")
	if r := e2.record(first.ContextID); r.Reason != contexts.ReasonRotated {
		t.Fatalf("default context not rotated: %+v", r)
	}
}

// TestRotationPerContextLimit: a positive MaxExecutions replaces the
// config's limit for that context.
func TestRotationPerContextLimit(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{MaxExecutions: 2})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(id, "1")
	e.exec(id, "1")
	if r := e.record(rec.ID); r.State != contexts.StateTerminated || r.Reason != contexts.ReasonRotated || r.ExecutionCount != 2 {
		t.Fatalf("record = %+v", r)
	}
}
