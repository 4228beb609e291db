// Package migrate reads a store's embedded, versioned migrations. Files are
// named NNNN_name.sql; each is applied once, in version order, and recorded
// in the store's schema_migrations table. A migration is applied when its
// version is not recorded, not only when it is above the highest recorded
// one: versions are reserved by parallel branches, so a lower number can
// arrive after a higher one. The stores apply them (SQLite in
// one immediate transaction, Postgres under an advisory lock); migrations
// are never edited once released, only added.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// Migration is one versioned SQL script.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load returns the migrations in dir of fsys, sorted by version. Versions
// must be unique and positive.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Known fails when the database records a migration this binary does not
// have: it was migrated by a newer sandlot.
func Known(ms []Migration, applied map[int]bool) error {
	have := map[int]bool{}
	for _, m := range ms {
		have[m.Version] = true
	}
	for v := range applied {
		if !have[v] {
			return fmt.Errorf("database schema has migration %d, unknown to this binary (a newer sandlot migrated it): %w", v, errdefs.ErrFailedPrecondition)
		}
	}
	return nil
}
