package store

import (
	"testing"

	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/sqlite"
)

// TestSchemaVersion: /v1/version and --version report one schema number
// for every store, which holds only while their migrations move together.
func TestSchemaVersion(t *testing.T) {
	got, pg := SchemaVersion(), postgres.SchemaVersion()
	if got <= 0 || got != pg {
		t.Errorf("SchemaVersion %d, sqlite %d, postgres %d: the stores' newest migrations must agree", got, sqlite.SchemaVersion(), pg)
	}
}
