package oci

import (
	"context"
	"testing"
	"time"
)

// TestCachedInfo: what create caches of a new bundle is what a fresh
// process reads back from its config.json and runtime files.
func TestCachedInfo(t *testing.T) {
	for _, kind := range []string{KindCrun, KindRunc} {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id := createProbe(t, ctx, r)
			t.Cleanup(func() { r.Delete(context.Background(), id) })
			v, ok := r.info.Load(id)
			if !ok {
				t.Fatal("create cached nothing")
			}
			cached := *v.(*sandboxInfo)
			r.info.Delete(id)
			read, err := r.sandboxInfo(id)
			if err != nil {
				t.Fatal(err)
			}
			if cached != *read {
				t.Errorf("cached %+v, read back %+v", cached, *read)
			}
		})
	}
}
