package server_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/errdefs"
)

// TestFileMetadata: a replacing write sets the file's whole metadata
// (user.e2b.* attributes), stat and list show it, an appending write keeps
// it, and bounds hold.
func TestFileMetadata(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	ctx := context.Background()
	md := map[string]string{"author": "mish", "purpose": "upload"}
	fi, err := c.WriteFile(ctx, agent.WriteParams{Path: "m.txt", Data: []byte("x"), Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(md, fi.Metadata); diff != "" {
		t.Fatalf("write (-want +got):\n%s", diff)
	}
	if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "m.txt", Data: []byte("y"), Append: true}); err != nil {
		t.Fatal(err)
	}
	ls, err := c.List(ctx, agent.ListParams{Path: "."})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ls {
		if e.Name == "m.txt" && !cmp.Equal(md, e.Metadata) {
			t.Errorf("list after append: %v", e.Metadata)
		}
	}
	fi, err = c.WriteFile(ctx, agent.WriteParams{Path: "m.txt", Data: []byte("z")})
	if err != nil || fi.Metadata != nil {
		t.Fatalf("overwrite keeps stale metadata: %v %v", fi, err)
	}
	many := map[string]string{}
	for i := range 65 {
		many[fmt.Sprint("k", i)] = "v"
	}
	if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "m.txt", Data: []byte("z"), Metadata: many}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("65 keys: %v", err)
	}
}
