package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"testing"

	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/store/storetest"
)

func open(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sandlot.db"), sqlite.Config{SecretsKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// TestSecretsAtRest reads the database file behind the store's back.
func TestSecretsAtRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandlot.db")
	db := func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	storetest.SecretsAtRest(t, storetest.AtRest{
		Open: func(t *testing.T, key []byte) (store.Backend, error) {
			s, err := sqlite.Open(context.Background(), path, sqlite.Config{SecretsKey: key})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Raw: func(t *testing.T) []string {
			d := db(t)
			defer d.Close()
			rows, err := d.Query(`SELECT value FROM tenant_secrets ORDER BY name`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
			return out
		},
		PutPlain: func(t *testing.T, tenantID, name, value string) {
			d := db(t)
			defer d.Close()
			if _, err := d.Exec(`INSERT INTO tenant_secrets (tenant_id, name, id, hosts, env, value, created_at, updated_at)
				VALUES (?, ?, 'plain0123456789abcdef012', '["x.test"]', '', ?, 0, 0)`, tenantID, name, value); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestContextEnvAtRest reads the env column behind the store's back.
func TestContextEnvAtRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandlot.db")
	db := func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	storetest.ContextEnvAtRest(t, func(t *testing.T, key []byte) (store.Backend, error) {
		s, err := sqlite.Open(context.Background(), path, sqlite.Config{SecretsKey: key})
		if err != nil {
			return nil, err
		}
		return s, nil
	}, func(t *testing.T, id string) string {
		var v string
		if err := db(t).QueryRow(`SELECT env FROM execution_contexts WHERE id = ?`, id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}, func(t *testing.T, id, v string) {
		if _, err := db(t).Exec(`UPDATE execution_contexts SET env = ? WHERE id = ?`, v, id); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return open(t) })
}

// TestReopen checks that migrations apply once and data survives a restart.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandlot.db")
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &contexts.Record{Identity: contexts.Identity{TenantID: "t", ConversationID: "c", PathID: "main"}}
	if err := s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	v1, err := s.Version(ctx)
	if err != nil || v1 < 1 {
		t.Fatalf("Version = %d, %v", v1, err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v2, err := s.Version(ctx); err != nil || v2 != v1 {
		t.Fatalf("Version after reopen = %d, %v; want %d", v2, err, v1)
	}
	if _, err := s.GetActive(ctx, rec.Identity); err != nil {
		t.Fatalf("record lost across reopen: %v", err)
	}
}

// TestTwoStoresOneFile stands in for two daemons on one database file: the
// partial unique index, not the Go-side writer queue, keeps one active
// context per identity, and the busy timeout absorbs lock contention.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandlot.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(ctx, path, sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const n = 20
	var (
		wg         sync.WaitGroup
		wins, dups atomic.Int32
		errs       = make(chan error, n)
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(s *sqlite.Store) {
			defer wg.Done()
			<-start
			err := s.Create(ctx, &contexts.Record{Identity: contexts.Identity{TenantID: "t", ConversationID: "race", PathID: "main"}})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, errdefs.ErrAlreadyExists):
				dups.Add(1)
			default:
				errs <- err
			}
		}(stores[i%2])
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if wins.Load() != 1 || dups.Load() != n-1 {
		t.Fatalf("wins=%d already_exists=%d, want 1 and %d", wins.Load(), dups.Load(), n-1)
	}
	act, err := stores[0].GetActive(ctx, contexts.Identity{TenantID: "t", ConversationID: "race", PathID: "main"})
	if err != nil {
		t.Fatal(err)
	}
	var terminated atomic.Int32
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(s *sqlite.Store) {
			defer wg.Done()
			ok, err := s.Terminate(ctx, act.ID, contexts.ReasonExpired, time.Now(), "")
			if err != nil {
				t.Error(err)
			}
			if ok {
				terminated.Add(1)
			}
		}(stores[i%2])
	}
	wg.Wait()
	if terminated.Load() != 1 {
		t.Fatalf("%d Terminates returned true, want 1", terminated.Load())
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Backend {
		s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "sandlot.db"), sqlite.Config{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

func TestCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "sandlot.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("database file mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestNewerSchema refuses a database migrated by a newer binary.
func TestNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandlot.db")
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(ctx, path, sqlite.Config{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Open of a newer schema: %v, want failed_precondition", err)
	}
}
