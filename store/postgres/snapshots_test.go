package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// TestSnapshotsRLS runs raw statements on the snapshots table as the
// application role under tenant B's setting, below the store's filters:
// B reads and deletes only its own rows, inserts none of A's (not even on
// its own template) and updates none (not the fork mark either). Without the policy (RLS not
// enabled on the table) B read and deleted A's rows.
func TestSnapshotsRLS(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.SchemaURL(t))
	ids := map[string]string{}
	for _, tn := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: tn}, tenant.HashKey("e2b_snaprls"+tn)); err != nil {
			t.Fatal(err)
		}
		tp, err := s.CreateTemplate(ctx, templates.Template{TenantID: tn, Name: "snap", Image: "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"})
		if err != nil {
			t.Fatal(err)
		}
		ids[tn] = tp.ID
		if err := s.CreateSnapshot(ctx, templates.Snapshot{ID: tp.ID, TenantID: tn, ContextID: "ctx-" + tn, Template: "default"}); err != nil {
			t.Fatal(err)
		}
	}
	asB := func(fn func(tx pgx.Tx) error) error {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT set_config('role', $1, true), set_config('app.tenant_id', 'B', true)`, postgres.AppRole); err != nil {
			t.Fatal(err)
		}
		return fn(tx)
	}
	asB(func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `SELECT context_id FROM snapshots ORDER BY context_id`)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || fmt.Sprint(got) != "[ctx-B]" {
			t.Errorf("B reads %q (%v), want [ctx-B]", got, err)
		}
		return nil
	})
	asB(func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM snapshots`)
		if err != nil || tag.RowsAffected() != 1 {
			t.Errorf("B's unrestricted delete: %d rows, %v; want only its own", tag.RowsAffected(), err)
		}
		return nil
	})
	for _, q := range []string{
		`INSERT INTO snapshots (id, tenant_id, context_id, template, bytes, created_at) VALUES ('` + ids["B"] + `', 'A', 'evil', 'default', 0, now())`,
		`UPDATE snapshots SET context_id = 'evil'`,
		`UPDATE snapshots SET fork = NOT fork`, // a mark never changes: no sweep of a tenant's own
	} {
		err := asB(func(tx pgx.Tx) error { _, err := tx.Exec(ctx, q); return err })
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s: err = %v, want SQLSTATE 42501", q, err)
		}
	}
	for _, tn := range []string{"A", "B"} {
		if got, err := s.ListSnapshots(ctx, tn, ""); err != nil || len(got) != 1 {
			t.Errorf("%s's snapshots after B's statements: %+v %v", tn, got, err)
		}
	}
}
