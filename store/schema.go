package store

import "github.com/sandlot/sandlot/store/sqlite"

// SchemaVersion is the schema version this binary's stores migrate to.
// SQLite and Postgres number their migrations alike (TestSchemaVersion),
// so one number names the schema of either.
func SchemaVersion() int { return sqlite.SchemaVersion() }
