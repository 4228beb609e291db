package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// TestUpdatedAtTrigger: the BEFORE UPDATE trigger moves updated_at on every
// change, whichever statement makes it (Update, Touch, RecordExecution,
// Terminate).
func TestUpdatedAtTrigger(t *testing.T) {
	u := pgtest.SchemaURL(t)
	s := open(t, u)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	now := time.Now()
	rec := &contexts.Record{Identity: contexts.Identity{TenantID: "t1", ConversationID: "c1", PathID: "main"},
		State: contexts.StateCreating, ExpiresAt: now.Add(time.Hour)}
	if err := s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	updatedAt := func() time.Time {
		t.Helper()
		var at time.Time
		if err := conn.QueryRow(ctx, "SELECT updated_at FROM execution_contexts WHERE id = $1", rec.ID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	last := updatedAt()
	for _, step := range []struct {
		name string
		fn   func() error
	}{
		{"update", func() error { rec.State = contexts.StateReady; rec.SandboxID = "sb1"; return s.Update(ctx, rec) }},
		{"touch", func() error { return s.Touch(ctx, rec.ID, time.Now(), time.Now().Add(time.Hour)) }},
		{"record execution", func() error {
			_, err := s.RecordExecution(ctx, rec.ID, 1, time.Millisecond, time.Now(), time.Now().Add(time.Hour))
			return err
		}},
		{"terminate", func() error { _, err := s.Terminate(ctx, rec.ID, contexts.ReasonManual, time.Now(), ""); return err }},
		// a statement that does not name updated_at: only the trigger moves it
		{"raw update", func() error {
			_, err := conn.Exec(ctx, "UPDATE execution_contexts SET last_error = 'x' WHERE id = $1", rec.ID)
			return err
		}},
	} {
		time.Sleep(5 * time.Millisecond)
		if err := step.fn(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if at := updatedAt(); !at.After(last) {
			t.Fatalf("%s: updated_at %v, not after %v", step.name, at, last)
		} else {
			last = at
		}
	}
}
