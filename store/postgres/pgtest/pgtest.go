// Package pgtest gives a test its own empty schema on the Postgres server
// named by SANDLOT_TEST_POSTGRES, so it owns every row it sees.
package pgtest

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/internal/testenv"
)

// SchemaURL creates a uniquely named, empty schema and returns
// SANDLOT_TEST_POSTGRES with its search_path set to it; the schema is
// dropped when t ends. Without the variable t is skipped, or fails in CI.
func SchemaURL(t testing.TB) string {
	t.Helper()
	base := testenv.Env(t, "SANDLOT_TEST_POSTGRES")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("SANDLOT_TEST_POSTGRES: %v", err)
	}
	ctx := context.Background()
	schema := "sandlot_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect %s: %v", base, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
