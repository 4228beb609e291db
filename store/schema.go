package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/sqlite"
)

// Migration names one schema migration of this binary.
type Migration struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
}

// Schema is where a store's database stands against this binary's
// migrations (InspectSchema).
type Schema struct {
	// Kind is sqlite or postgres.
	Kind string `json:"kind"`
	// Exists is false for a SQLite file not created yet.
	Exists bool `json:"exists"`
	// Current is the database's version, Latest this binary's.
	Current int `json:"current"`
	Latest  int `json:"latest"`
	// Pending are the migrations Open would apply, in order.
	Pending []Migration `json:"pending"`
	// Newer are the versions the database records that this binary
	// lacks; Err says what to do then.
	Newer []int `json:"newer,omitempty"`
	err   error
}

// Err is nil unless a newer sandlot migrated the database: then Open
// refuses it, with the same message.
func (s Schema) Err() error { return s.err }

// InspectSchema reads the schema version of the store at url and the
// migrations Open would apply, changing nothing (no file is created, no
// lock taken). The memory store has no schema (invalid_argument).
func InspectSchema(ctx context.Context, url string) (Schema, error) {
	var (
		st  migrate.Status
		out Schema
		err error
	)
	switch {
	case url == "memory:" || url == "memory":
		return out, fmt.Errorf("store: the memory store has no schema: %w", errdefs.ErrInvalidArgument)
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		out.Kind, out.Exists = "postgres", true
		st, err = postgres.Inspect(ctx, url)
	case url == "":
		return out, fmt.Errorf("store: empty url: %w", errdefs.ErrInvalidArgument)
	default:
		out.Kind = "sqlite"
		st, out.Exists, err = sqlite.Inspect(ctx, SQLitePath(url))
	}
	if err != nil {
		return out, err
	}
	out.Current, out.Latest, out.Newer, out.err = st.Current, st.Latest, st.Unknown, st.Err()
	out.Pending = []Migration{}
	for _, m := range st.Pending {
		_, name, _ := strings.Cut(strings.TrimSuffix(m.Name, ".sql"), "_")
		out.Pending = append(out.Pending, Migration{Version: m.Version, Name: name})
	}
	return out, nil
}

// SQLitePath is the file of a SQLite store URL (sqlite:///abs, sqlite:rel
// or a bare path), as Open reads it; "" for another kind of URL.
func SQLitePath(url string) string {
	switch {
	case url == "memory:" || url == "memory", strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return ""
	}
	if p, ok := strings.CutPrefix(url, "sqlite://"); ok {
		return p // sqlite:///abs/path -> /abs/path
	}
	if p, ok := strings.CutPrefix(url, "sqlite:"); ok {
		return p
	}
	return url
}

// SchemaVersion is the newest schema version this binary has (both SQL
// stores number their migrations alike).
func SchemaVersion() int { return sqlite.SchemaVersion() }
