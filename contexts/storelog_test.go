package contexts_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
)

// TestStoreFailureIsLogged: while the store is down the calls succeed from
// the in-memory state, and every failed store call is logged as a warning
// naming the operation and the error.
func TestStoreFailureIsLogged(t *testing.T) {
	var logs testenv.Buffer
	fs := &flakyStore{Store: memory.New()}
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: fs, clock: newClock()}
	e.start(contexts.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	id := ident("t1", "c1", "main")
	e.exec(id, "x = 1")
	fs.failing.Store(true)
	if res := e.exec(id, "print(x)"); res.Stdout != "1\n" {
		t.Fatalf("with the store down: %+v", res)
	}
	// Execute records its use after the call (one write); GetOrCreate
	// touches on reuse.
	if _, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.exec(ident("t1", "c2", "main"), "1") // created in memory
	out := logs.String()
	for _, want := range []string{
		`level=WARN msg="store: touch context"`,
		`level=WARN msg="store: record execution"`,
		`level=WARN msg="store: create context; carrying on in memory"`,
		`error="store is down: unavailable"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}
