package sqlite_test

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToUsers opens a database made by the migrations before
// version 10, holding an active context: migration 10 gives it no user,
// keeps its key unique, and lets a user of the same conversation have a
// context of its own.
func TestUpgradeToUsers(t *testing.T) {
	ctx := context.Background()
	path, db, exec := databaseBefore(t, 10)
	exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at, last_used_at, expires_at, updated_at)
		VALUES (?, 't', 'c', 'main', 'ready', 'sb-1', 1, 1, 9999999999999, 1)`, storetest.LegacyContextID)
	db.Close()
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Version(ctx); err != nil || v < 10 {
		t.Fatalf("Version = %d, %v; want at least 10", v, err)
	}
	storetest.CheckLegacyUser(t, s)
}
