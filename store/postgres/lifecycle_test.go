package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToLifecycle opens a schema made by the migrations before
// version 6 (1 to 5 as released), whose records keep their lifecycle
// state under "sandlot." metadata keys: migration 6 moves it into the
// typed columns and leaves the caller's metadata alone.
func TestUpgradeToLifecycle(t *testing.T) {
	ctx := context.Background()
	u, conn, exec := schemaBefore(ctx, t, 6)
	for i, row := range storetest.LegacyRows() {
		meta, _ := json.Marshal(row.Metadata)
		if row.Metadata == nil {
			meta = []byte("{}")
		}
		exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at,
			last_used_at, expires_at, metadata) VALUES ($1, 't', $2, 'main', 'ready', 'sb', now(), now(), now() + interval '1 hour', $3::jsonb)`,
			row.ID, fmt.Sprint("c", i), string(meta))
	}
	conn.Close(ctx)

	s := open(t, u)
	if v, err := s.Version(ctx); err != nil || v < 6 {
		t.Fatalf("Version = %d, %v; want at least 6", v, err)
	}
	storetest.CheckLegacy(t, s)
}
