package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// chattyPrints is how many lines the chatty cell prints.
const chattyPrints = 1000

// chattyCase times a warm python cell that prints chattyPrints lines with
// its output streamed to the caller, and counts the output events the
// caller gets per call: the agent joins the writes a cell makes within its
// output window, so a loop of prints is a handful of events, not one or
// two per print.
func chattyCase(env Env, sz Sizes) Case {
	return Case{Name: "streamed chatty cell", Group: "warm", Run: func(ctx context.Context) ([]Figure, error) { return chatty(ctx, env, sz) }}
}

func chatty(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: -1})
	if err != nil {
		return nil, err
	}
	defer stop()
	id := ident("warm-chatty")
	req := contexts.ExecuteRequest{Language: "python", Code: fmt.Sprintf("for i in range(%d):\n    print(i)", chattyPrints)}
	var b strings.Builder
	for i := range chattyPrints {
		fmt.Fprintf(&b, "%d\n", i)
	}
	want := b.String()
	var counts []int
	var got strings.Builder
	call := func(ctx context.Context) error {
		n := 0
		got.Reset()
		res, err := m.Execute(ctx, id, req, func(ev agent.OutputEvent) {
			if ev.Stream == agent.Stdout {
				n++
				got.WriteString(ev.Data)
			}
		})
		if err != nil {
			return err
		}
		if !res.Success || res.Stdout != want || got.String() != want {
			return fmt.Errorf("chatty cell: success %v, stdout %d bytes, streamed %d, want %d", res.Success, len(res.Stdout), got.Len(), len(want))
		}
		counts = append(counts, n)
		return nil
	}
	samples, err := Time(ctx, 10, max(sz.Warm/10, 20), call)
	if err != nil {
		return nil, err
	}
	counts = counts[10:] // the warm-up calls'
	sort.Ints(counts)
	f := Latency(fmt.Sprintf("warm run_code python (%d prints, streamed), Go API", chattyPrints), samples)
	f.Note = fmt.Sprintf("stdout events per call: p50 %d, min %d, max %d", counts[len(counts)/2], counts[0], counts[len(counts)-1])
	return []Figure{f}, nil
}
