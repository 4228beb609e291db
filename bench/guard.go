package bench

// The guard case: throughput on a log corpus, with and without the entity
// model, and the entity types' precision and recall.

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/entitycorpus"
	"github.com/sandlot/sandlot/guard/ner"
)

// guardScan measures the guard redacting mixed log text (mostly clean
// lines, a finding every few hundred): Text in enforce mode, with the
// patterns and entity rules alone (the guard as env gives it, or a
// default one), then with the entity model on; and the entity model's
// precision and recall per type on the labelled corpus
// (guard/entitycorpus).
func guardScan(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	g := env.Guard
	if g == nil {
		var err error
		if g, err = guard.New(guard.Config{}); err != nil {
			return nil, err
		}
	}
	text := LogCorpus(sz.GuardMB<<20, 7)
	mbs := guardMBs(ctx, g, text)
	f := Figure{Name: fmt.Sprintf("guard: redact mixed log text (%d MiB, best of 3)", sz.GuardMB), Value: round(mbs, 1), Unit: "MB/s"}
	out := []Figure{WithTarget(f, fmt.Sprintf(">= %g MB/s", targetGuardMBs), mbs >= targetGuardMBs)}
	m, err := ner.Load()
	if err != nil {
		return append(out, Figure{Name: "guard: entity model", Note: "not measured: " + err.Error()}), nil
	}
	// The model's own cost: no time budget (serve's guard has one,
	// guard.DefaultModelBudget).
	gm, err := guard.New(guard.Config{Model: m, ModelBudget: -1})
	if err != nil {
		return nil, err
	}
	info := m.Info()
	mbs = guardMBs(ctx, gm, text)
	f = Figure{Name: fmt.Sprintf("guard: redact mixed log text with the entity model (%d MiB, best of 3)", sz.GuardMB), Value: round(mbs, 1), Unit: "MB/s",
		Note: fmt.Sprintf("%s: %.0f MB of heap, loaded in %.2f s", info.Name, float64(info.Bytes)/1e6, info.LoadTime.Seconds())}
	out = append(out, WithTarget(f, fmt.Sprintf(">= %g MB/s", targetGuardModelMBs), mbs >= targetGuardModelMBs))
	docs, err := entitycorpus.Docs()
	if err != nil {
		return nil, err
	}
	var size int
	for _, d := range docs {
		size += len(d.Text)
	}
	t0 := time.Now()
	scores := entitycorpus.Evaluate(docs, gm.Scan)
	out = append(out, Figure{Name: fmt.Sprintf("guard: labelled entity corpus (%d KB, PII in every line)", size/1000),
		Value: round(float64(size)/1e6/time.Since(t0).Seconds(), 2), Unit: "MB/s"})
	for _, sc := range scores {
		out = append(out, entityFigure(sc))
	}
	return out, nil
}

// entityFigure is an entity type's row. What was measured goes in the
// note, so the name is the same in every run: a repeated run lines rows up
// by name.
func entityFigure(sc entitycorpus.Score) Figure {
	p, r := sc.Precision(), sc.Recall()
	f := Figure{Name: fmt.Sprintf("guard: %s precision and recall (%d labelled)", sc.Type, sc.Labels),
		Value: round(r, 3), Unit: "recall", Note: fmt.Sprintf("precision %.2f, recall %.2f, %d found", p, r, sc.Found)}
	if sc.Type == guard.TypePerson || sc.Type == guard.TypeAddress {
		f = WithTarget(f, "precision >= 0.85, recall >= 0.9", p >= 0.85 && r >= 0.9)
	}
	return f
}

// guardMBs is the best of three runs of g.Text over text, in MB/s.
func guardMBs(ctx context.Context, g *guard.Guard, text string) float64 {
	g.Text(ctx, benchTenant, text[:min(len(text), 1<<20)]) // warm up
	var best time.Duration
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		g.Text(ctx, benchTenant, text)
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	return float64(len(text)) / (1 << 20) / best.Seconds()
}

// LogCorpus returns about n bytes of application log lines: timestamps,
// levels, paths, JSON fragments and numbers, with an email, a phone number
// or an API key about every 200 lines.
func LogCorpus(n int, seed int64) string {
	r := rand.New(rand.NewSource(seed))
	levels := []string{"INFO", "DEBUG", "WARN", "ERROR"}
	paths := []string{"/v1/orders", "/v1/users/42/profile", "/healthz", "/static/app.js", "/v1/search?q=shoes&page=3"}
	var b strings.Builder
	b.Grow(n + 256)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; b.Len() < n; i++ {
		ts = ts.Add(time.Duration(r.Intn(900)) * time.Millisecond)
		fmt.Fprintf(&b, "%s %-5s req=%08x %s %d %dms ", ts.Format(time.RFC3339Nano), levels[r.Intn(len(levels))],
			r.Uint32(), paths[r.Intn(len(paths))], 200+r.Intn(4)*100, r.Intn(900))
		switch {
		case i%200 == 17:
			fmt.Fprintf(&b, "notify user%d@exemplar.ie\n", r.Intn(1000))
		case i%200 == 91:
			fmt.Fprintf(&b, "callback +1 415 555 %04d\n", r.Intn(10000))
		case i%200 == 150:
			fmt.Fprintf(&b, "token=sk-proj-%s\n", randAlnum(r, 48))
		case i%3 == 0:
			fmt.Fprintf(&b, `{"user_id":%d,"items":[%d,%d],"total":%.2f,"currency":"EUR"}`+"\n", r.Intn(1e6), r.Intn(100), r.Intn(100), r.Float64()*500)
		default:
			fmt.Fprintf(&b, "cache hit ratio %.3f, queue depth %d, build 4.%d.%d\n", r.Float64(), r.Intn(64), r.Intn(20), r.Intn(100))
		}
	}
	return b.String()
}

func randAlnum(r *rand.Rand, n int) string {
	const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = abc[r.Intn(len(abc))]
	}
	return string(b)
}
