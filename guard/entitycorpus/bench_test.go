package entitycorpus_test

import (
	"testing"

	"github.com/sandlot/sandlot/bench"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/ner"
)

// BenchmarkLogModel: sandlot bench's guard corpus with the model on.
func BenchmarkLogModel(b *testing.B) {
	m, err := ner.Load()
	if err != nil {
		b.Fatal(err)
	}
	g, _ := guard.New(guard.Config{Model: m, ModelBudget: -1})
	text := bench.LogCorpus(16<<20, 7)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		g.Scan(text)
	}
}
