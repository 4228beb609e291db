package postgres_test

import (
	"context"
	"errors"
	"fmt"
	stdstrings "strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// TestTemplatesRLS runs raw statements as the application role under
// tenant B's setting, below the store's own filters, and shows that the
// policy alone confines them: B reads its templates and the public ones,
// deletes only its own, and can insert neither A's nor a public one nor
// update any.
func TestTemplatesRLS(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.SchemaURL(t))
	for _, tn := range []string{"A", "B"} {
		if err := s.CreateTenant(ctx, &tenant.Tenant{ID: tn}, tenant.HashKey("e2b_rls"+tn)); err != nil {
			t.Fatal(err)
		}
	}
	const img = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	for _, tn := range []string{"A", "B", ""} {
		if _, err := s.CreateTemplate(ctx, templates.Template{TenantID: tn, Name: "t" + stdstrings.ToLower(tn), Image: img}); err != nil {
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
		rows, _ := tx.Query(ctx, `SELECT name FROM templates ORDER BY name`)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || fmt.Sprint(names) != "[t tb]" {
			t.Errorf("B reads %q (%v), want [t tB]", names, err)
		}
		return nil
	})
	asB(func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM templates`)
		if err != nil || tag.RowsAffected() != 1 {
			t.Errorf("B's unrestricted delete: %d rows, %v; want only its own", tag.RowsAffected(), err)
		}
		return nil
	})
	for _, q := range []string{
		`INSERT INTO templates (id, tenant_id, name, image, settings, created_at) VALUES ('xxxxxxxxxxxxxxxxxxx1', 'A', 'evil', 'sha256:x', '{}', now())`,
		`INSERT INTO templates (id, tenant_id, name, image, settings, created_at) VALUES ('xxxxxxxxxxxxxxxxxxx2', NULL, 'evil', 'sha256:x', '{}', now())`,
		`UPDATE templates SET image = 'sha256:evil'`,
	} {
		err := asB(func(tx pgx.Tx) error { _, err := tx.Exec(ctx, q); return err })
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s: err = %v, want SQLSTATE 42501", q, err)
		}
	}
	all, err := s.ListTemplates(ctx, "", true)
	if err != nil || len(all) != 3 {
		t.Fatalf("after B's statements: %+v %v", all, err)
	}
}
