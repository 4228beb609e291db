package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/store/sqlite"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		url  string
		want string
	}{
		{"memory:", "memory"},
		{"sqlite://" + filepath.Join(dir, "a.db"), "sqlite"},
		{"sqlite:" + filepath.Join(dir, "b.db"), "sqlite"},
		{filepath.Join(dir, "c.db"), "sqlite"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			b, err := store.Open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got := ""
			switch b.(type) {
			case *memory.Store:
				got = "memory"
			case *sqlite.Store:
				got = "sqlite"
			}
			if got != tc.want {
				t.Fatalf("Open(%q) = %T, want %s", tc.url, b, tc.want)
			}
		})
	}
	if _, err := store.Open(ctx, ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Open(\"\") = %v, want invalid_argument", err)
	}
}
