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

// Status is where a database stands against a binary's migrations.
type Status struct {
	// Current is the highest version the database records (0: none).
	Current int
	// Latest is the newest version the binary has.
	Latest int
	// Pending are the binary's migrations the database lacks, in the
	// order they would be applied.
	Pending []Migration
	// Unknown are versions the database records that the binary lacks:
	// a newer sandlot migrated it.
	Unknown []int
}

// Plan compares the recorded versions applied with ms (sorted, as Load
// returns them).
func Plan(ms []Migration, applied map[int]bool) Status {
	var st Status
	have := map[int]bool{}
	for _, m := range ms {
		have[m.Version] = true
		st.Latest = max(st.Latest, m.Version)
		if !applied[m.Version] {
			st.Pending = append(st.Pending, m)
		}
	}
	for v := range applied {
		st.Current = max(st.Current, v)
		if !have[v] {
			st.Unknown = append(st.Unknown, v)
		}
	}
	sort.Ints(st.Unknown)
	return st
}

// Err is nil unless the database was migrated by a newer sandlot, which
// this binary must not run on: it names both versions and what to do.
func (st Status) Err() error {
	if len(st.Unknown) == 0 {
		return nil
	}
	lacks := make([]string, len(st.Unknown))
	for i, v := range st.Unknown {
		lacks[i] = strconv.Itoa(v)
	}
	return fmt.Errorf("the database's schema is at version %d, newer than this sandlot's %d (it lacks migration %s): a newer sandlot migrated it. "+
		"Run that release or a later one on this store, or restore a backup taken before the upgrade; sandlot never migrates a schema down: %w",
		st.Current, st.Latest, strings.Join(lacks, ", "), errdefs.ErrFailedPrecondition)
}

// Known fails when the database records a migration this binary does not
// have: it was migrated by a newer sandlot (Status.Err).
func Known(ms []Migration, applied map[int]bool) error {
	return Plan(ms, applied).Err()
}
