package templates_test

import (
	"archive/tar"
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// countingSnapshots counts the reads of a tenant's snapshot rows.
type countingSnapshots struct {
	templates.SnapshotStore
	lists atomic.Int64
}

func (c *countingSnapshots) ListSnapshots(ctx context.Context, tenantID, contextID string) ([]templates.Snapshot, error) {
	c.lists.Add(1)
	return c.SnapshotStore.ListSnapshots(ctx, tenantID, contextID)
}

// TestIsForkTemplateBuiltins: the manager asks at every end and wake of a
// context whether its template is a fork's, and each ask read every
// snapshot row of the tenant (up to MaxSnapshots), even for the built-in
// templates most contexts run. A fork's template is a snapshot, whose id
// is a stored template's (20 of [a-z0-9], given by the store, never
// chosen by the tenant), so an id of another shape is answered without a
// read; a fork's template is still found.
func TestIsForkTemplateBuiltins(t *testing.T) {
	ctx := context.Background()
	var cs *countingSnapshots
	c, _ := newCatalogWith(t, func(cfg *templates.Config) {
		cs = &countingSnapshots{SnapshotStore: cfg.Store.(templates.SnapshotStore)}
		cfg.Snapshots = cs
	})
	archive := templatestest.DockerArchive(t, templatestest.Image(t, "base"), "example.test/app:v1")
	src, err := c.Import(ctx, "A", archive, templates.Spec{Name: "app"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	empty := func(ctx context.Context, w io.Writer, max int64) error { return tar.NewWriter(w).Close() }
	fork, _, err := c.Snapshot(ctx, "A", templates.SnapshotSpec{ContextID: "ctx-1", Template: src.ID, Fork: true}, empty)
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := c.Snapshot(ctx, "A", templates.SnapshotSpec{ContextID: "ctx-1", Template: src.ID, Name: "default-ish"}, empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id    string
		want  bool
		reads bool
	}{
		{templates.Default, false, false},
		{templates.Desktop, false, false},
		{templates.CodeInterpreter, false, false},
		{templates.Host, false, false},
		{"default-ish", false, false}, // a name, not an id
		{src.ID, false, true},
		{plain.ID, false, true},
		{fork.ID, true, true},
	} {
		t.Run(tc.id, func(t *testing.T) {
			before := cs.lists.Load()
			got, err := c.IsForkTemplate(ctx, "A", tc.id)
			if err != nil || got != tc.want {
				t.Errorf("IsForkTemplate(%s) = %v, %v; want %v", tc.id, got, err, tc.want)
			}
			if read := cs.lists.Load() > before; read != tc.reads {
				t.Errorf("IsForkTemplate(%s) read the snapshot rows: %v, want %v", tc.id, read, tc.reads)
			}
		})
	}
}
