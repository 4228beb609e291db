package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToUsers opens a schema made by the migrations before version
// 10, holding an active context: migration 10 gives it no user, keeps its
// key unique, and lets a user of the same conversation have a context of
// its own.
func TestUpgradeToUsers(t *testing.T) {
	ctx := context.Background()
	u, conn, exec := schemaBefore(ctx, t, 10)
	now := time.Now()
	exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at, last_used_at, expires_at)
		VALUES ($1, 't', 'c', 'main', 'ready', 'sb-1', $2, $2, $3)`, storetest.LegacyContextID, now, now.Add(time.Hour))
	conn.Close(ctx)
	storetest.CheckLegacyUser(t, open(t, u))
}
