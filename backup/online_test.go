package backup

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/store"
)

// TestBackupWhileWriting takes backups of a store that a writer changes
// all the while, in transactions of ten audit events each: every restored
// database passes SQLite's integrity check and holds whole transactions
// only (a multiple of ten events), and later backups hold more.
func TestBackupWhileWriting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	s, err := store.Open(ctx, filepath.Join(dir, DatabaseName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var batches atomic.Int64
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			evs := make([]store.AuditEvent, 10)
			for i := range evs {
				evs[i] = store.AuditEvent{Kind: "test.write", Detail: map[string]string{"n": fmt.Sprint(i)}}
			}
			if err := s.AppendAuditBatch(context.Background(), evs); err != nil {
				done <- err
				return
			}
			batches.Add(1)
		}
		done <- nil
	}()
	waitBatches := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for batches.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the writer wrote %d batches in a minute", batches.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	last := -1
	for i := range 3 {
		waitBatches(batches.Load() + 5) // the writer is busy while the copy runs
		out := filepath.Join(t.TempDir(), "b.tar.gz")
		if _, err := Create(ctx, Config{DataDir: dir, Out: out}); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "d")
		if _, err := Restore(ctx, RestoreConfig{From: out, DataDir: dst}); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", filepath.Join(dst, DatabaseName))
		if err != nil {
			t.Fatal(err)
		}
		var check string
		var n int
		err = db.QueryRow(`PRAGMA integrity_check`).Scan(&check)
		if err == nil {
			err = db.QueryRow(`SELECT count(*) FROM audit_events`).Scan(&n)
		}
		db.Close()
		if err != nil || check != "ok" {
			t.Fatalf("backup %d: integrity %q, %v", i, check, err)
		}
		if n%10 != 0 || n <= last {
			t.Fatalf("backup %d holds %d events (the one before %d): want whole batches of ten, more each time", i, n, last)
		}
		last = n
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
