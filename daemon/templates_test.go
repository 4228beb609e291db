package daemon

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
)

// TestImageGCLoop: the scheduled GC removes the layers of an image that
// no template, name or sandbox uses, and keeps a template's.
func TestImageGCLoop(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	imgs, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tw := &templateWire{store: memory.New(), log: slog.New(slog.DiscardHandler)}
	tw.attach(imgs, nil)
	put := func(marker string) image.Image {
		img, err := imgs.Put(ctx, imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "marker", Body: marker})), image.PutOptions{Name: "tmp-" + marker})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	kept, gone := put("kept"), put("gone")
	if _, err := tw.store.CreateTemplate(ctx, templates.Template{Name: "kept", Image: kept.Digest.String()}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"tmp-kept", "tmp-gone"} {
		if err := imgs.Untag(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); tw.gcLoop(lctx, 20*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(gone.Layers[0].Dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduled GC never removed the unused layer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(kept.Layers[0].Dir); err != nil {
		t.Errorf("the scheduled GC removed a template's layer: %v", err)
	}
}
