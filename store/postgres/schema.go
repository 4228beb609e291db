package postgres

import "github.com/sandlot/sandlot/store/internal/migrate"

// SchemaVersion is the newest schema this binary knows: its last embedded
// migration's version.
func SchemaVersion() int { return migrate.Latest(migrations, "migrations") }
