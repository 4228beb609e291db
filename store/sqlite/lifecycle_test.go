package sqlite_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToLifecycle opens a database made by the schema before
// version 6 (migrations 1 to 5 as released), whose records keep their
// lifecycle state under "sandlot." metadata keys: migration 6 moves it
// into the typed columns and leaves the caller's metadata alone.
func TestUpgradeToLifecycle(t *testing.T) {
	ctx := context.Background()
	path, db, exec := databaseBefore(t, 6)
	for i, row := range storetest.LegacyRows() {
		meta, _ := json.Marshal(row.Metadata)
		if row.Metadata == nil {
			meta = []byte("{}")
		}
		exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at,
			last_used_at, expires_at, metadata, updated_at) VALUES (?, 't', ?, 'main', 'ready', 'sb', 1, 1, 9999999999999, ?, 1)`,
			row.ID, "c"+string(rune('0'+i)), string(meta))
	}
	db.Close()

	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Version(ctx); err != nil || v < 6 {
		t.Fatalf("Version = %d, %v; want at least 6", v, err)
	}
	storetest.CheckLegacy(t, s)
}
