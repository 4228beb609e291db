package layer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
)

// BenchmarkApply unpacks a layer of 1000 files of 16 KiB in 50
// directories: the cost of unpacking an image once, per byte.
func BenchmarkApply(b *testing.B) {
	testenv.RequireRoot(b)
	var ents []ent
	body := strings.Repeat("x", 16<<10)
	for i := range 1000 {
		ents = append(ents, ent{name: fmt.Sprintf("d%02d/f%04d", i%50, i), body: body})
	}
	raw := tarOf(b, ents...)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		b.StopTimer()
		dir, err := os.MkdirTemp(b.TempDir(), "l")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Apply(context.Background(), dir, bytes.NewReader(raw), Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
