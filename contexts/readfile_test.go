package contexts_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/guardtest"
)

// reads is a sandbox that records its ReadFile calls and serves at most
// short bytes per call when short > 0 (as a remote provider may).
type reads struct {
	contexts.Sandbox
	short  int64
	calls  []agent.ReadParams
	served []int // bytes returned by each call
}

func (r *reads) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	r.calls = append(r.calls, p)
	if r.short > 0 && (p.Limit == 0 || p.Limit > r.short) {
		p.Limit = r.short
	}
	res, err := r.Sandbox.ReadFile(ctx, p)
	if err == nil {
		r.served = append(r.served, len(res.Data))
	}
	return res, err
}

func newReads(t *testing.T, files map[string]string) *reads {
	t.Helper()
	sb, err := contextstest.NewProvider().Create(context.Background(), contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if _, err := sb.WriteFile(context.Background(), agent.WriteParams{Path: name, Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	return &reads{Sandbox: sb}
}

func readAll(t *testing.T, sb contexts.Sandbox, path string) (string, []contexts.FileChunk) {
	t.Helper()
	var out strings.Builder
	var chunks []contexts.FileChunk
	err := contexts.ReadFile(context.Background(), sb, path, func(c contexts.FileChunk) error {
		out.Write(c.Data)
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), chunks
}

// TestReadFileFollowsTheFile: the reader asks for bounded chunks at
// offsets of the file, however long the redacted output of each chunk is
// and however short the sandbox's answers are, and a value across a chunk
// boundary is redacted whole.
func TestReadFileFollowsTheFile(t *testing.T) {
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	file, want := guardtest.LargeText(3<<20, agent.ChunkSize)
	for _, short := range []int64{0, 100_000, 4093} {
		r := newReads(t, map[string]string{"big.txt": file})
		r.short = short
		got, chunks := readAll(t, contexts.GuardSandbox(r, g, "t"), "big.txt")
		if got != want {
			t.Fatalf("short %d: %d bytes, want %d", short, len(got), len(want))
		}
		off := 0
		for i, p := range r.calls {
			if p.Offset != int64(off) || p.Limit != agent.ChunkSize {
				t.Fatalf("short %d: read %d at %d limit %d, want offset %d limit %d", short, i, p.Offset, p.Limit, off, agent.ChunkSize)
			}
			off += r.served[i]
		}
		if off != len(file) {
			t.Fatalf("short %d: read %d bytes of %d", short, off, len(file))
		}
		last := chunks[len(chunks)-1]
		if !last.EOF || last.Size != int64(len(file)) {
			t.Fatalf("short %d: last chunk %+v", short, last)
		}
		for _, c := range chunks[:len(chunks)-1] {
			if c.EOF {
				t.Fatalf("short %d: EOF before the last chunk", short)
			}
		}
	}
}

func TestReadFileUnguarded(t *testing.T) {
	text, _ := guardtest.SecretText()
	r := newReads(t, map[string]string{"f": "\x00" + text})
	if got, _ := readAll(t, r, "f"); got != "\x00"+text {
		t.Fatalf("an unguarded sandbox changed the file: %q", got)
	}
	r = newReads(t, map[string]string{"empty": ""})
	if got, chunks := readAll(t, r, "empty"); got != "" || len(chunks) != 1 || !chunks[0].EOF {
		t.Fatalf("empty file: %q %+v", got, chunks)
	}
}

// TestReadFileStops: an error from fn ends the read, and what the guard
// held back is not emitted.
func TestReadFileStops(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	r := newReads(t, map[string]string{"f": strings.Repeat("x", agent.ChunkSize-3) + "sk-SECRET" + strings.Repeat("y", agent.ChunkSize)})
	stop := errors.New("stop")
	var got strings.Builder
	err := contexts.ReadFile(context.Background(), contexts.GuardSandbox(r, g, "t"), "f", func(c contexts.FileChunk) error {
		got.Write(c.Data)
		return stop
	})
	if !errors.Is(err, stop) || len(r.calls) != 1 {
		t.Fatalf("err %v after %d reads", err, len(r.calls))
	}
	if s := got.String(); strings.Contains(s, "sk-") || len(s) > agent.ChunkSize {
		t.Fatalf("emitted %d bytes ending %q", len(s), s[max(0, len(s)-10):])
	}
}

func TestReadFileErrorGuarded(t *testing.T) {
	g := &contextstest.Guard{Secrets: []string{"sk-SECRET"}}
	r := newReads(t, nil)
	err := contexts.ReadFile(context.Background(), contexts.GuardSandbox(r, g, "t"), "missing-sk-SECRET", func(contexts.FileChunk) error { return nil })
	if !errors.Is(err, errdefs.ErrNotFound) || strings.Contains(err.Error(), "sk-SECRET") {
		t.Fatalf("error = %v: want not_found, guarded", err)
	}
}
