package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/store/storetest"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	id := contexts.Identity{TenantID: "t", ConversationID: "c", PathID: "main"}
	rec := &contexts.Record{Identity: id, ExpiresAt: time.Now().Add(time.Minute)}
	if err := s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &contexts.Record{Identity: id}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	got, err := s.GetActive(ctx, id)
	if err != nil || got.ID != rec.ID {
		t.Fatalf("GetActive = %v, %v", got, err)
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return memory.New() })
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Backend { return memory.New() })
}
