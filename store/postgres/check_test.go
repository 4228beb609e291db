package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// TestStateCheck (000 §5.1, 001 §4.1): the database itself refuses a
// context state other than creating, ready, error and terminated, by the
// column's CHECK: a raw INSERT or UPDATE behind the store's back fails with
// check_violation, and each of the four states is accepted.
func TestStateCheck(t *testing.T) {
	u := pgtest.SchemaURL(t)
	open(t, u) // migrated
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	insert := func(state string) (string, error) {
		id := uuid.NewString()
		_, err := conn.Exec(ctx, `INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, created_at, last_used_at, expires_at)
			VALUES ($1, 't1', $2, 'main', $3, now(), now(), now() + interval '1 hour')`, id, "c-"+id, state)
		return id, err
	}
	wantCheck := func(what string, err error) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23514" {
			t.Errorf("%s: %v; want a check_violation (23514)", what, err)
		}
	}
	for _, state := range []string{"creating", "ready", "error", "terminated"} {
		if _, err := insert(state); err != nil {
			t.Errorf("state %s refused: %v", state, err)
		}
	}
	for _, state := range []string{"sleeping", "READY", "", "paused"} {
		_, err := insert(state)
		wantCheck("insert state "+state, err)
	}
	id, err := insert("ready")
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `UPDATE execution_contexts SET state = 'zombie' WHERE id = $1`, id)
	wantCheck("update to zombie", err)
}
