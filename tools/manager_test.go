package tools

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/memory"
)

// TestWithManager runs the tools over the real Manager and guard (memory
// store, fake provider): the sandbox the tools get is the guarded one.
func TestWithManager(t *testing.T) {
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{Guard: g, PoolSize: -1})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	r := New(m, Config{})
	do := func(tool, args string) (any, error) {
		return r.Call(ctx, Call{Name: tool, Identity: testID, Args: json.RawMessage(args)}, nil)
	}

	// run_code keeps state (the fake provider's Echo interpreter).
	if _, err := do("run_code", `{"language":"python","code":"x = 7"}`); err != nil {
		t.Fatal(err)
	}
	v, err := do("run_code", `{"language":"python","code":"print(x)"}`)
	if err != nil || v.(*RunCodeResult).Stdout != "7\n" || v.(*RunCodeResult).SandboxID == "" {
		t.Fatalf("run_code state: %v %+v", err, v)
	}

	// A secret written to a file is redacted when read back or grepped.
	key := "sk-proj-" + randomAlnum(48)
	content := "name = demo\napi_key = " + key + "\n"
	if _, err := do("write_file", `{"path":"conf.txt","content":`+quote(content)+`}`); err != nil {
		t.Fatal(err)
	}
	v, err = do("read_file", `{"path":"conf.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	got := v.(*ReadFileResult).Content
	if strings.Contains(got, key) || !strings.Contains(got, "[REDACTED:") || !strings.HasPrefix(got, "name = demo\n") {
		t.Errorf("read_file: %q", got)
	}
	v, err = do("list_files", `{}`)
	if err != nil || len(v.(*ListFilesResult).Entries) != 1 || v.(*ListFilesResult).Entries[0].Name != "conf.txt" {
		t.Errorf("list_files: %v %+v", err, v)
	}

	// Error categories survive the guard.
	if _, err := do("edit_file", `{"path":"conf.txt","old_string":"nothing here","new_string":"x"}`); !errors.Is(err, errdefs.ErrNotFound) ||
		!strings.Contains(err.Error(), "old_string not found") {
		t.Errorf("edit_file missing: %v", err)
	}
	if _, err := do("edit_file", `{"path":"conf.txt","old_string":"a","new_string":"b"}`); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("edit_file ambiguous: %v", err)
	}
	if _, err := do("read_file", `{"path":"nope.txt"}`); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("read_file missing: %v", err)
	}

	// bash output is guarded too (the fake echoes the command).
	v, err = do("bash", `{"command":"echo `+key+`"}`)
	if err != nil || strings.Contains(v.(*BashResult).Stdout, key) {
		t.Errorf("bash: %v %+v", err, v)
	}
}

func randomAlnum(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestReadFileSecretAcrossChunks: read_file redacts a secret that
// straddles the 1 MiB boundary of two ReadFile chunks.
func TestReadFileSecretAcrossChunks(t *testing.T) {
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{Guard: g, PoolSize: -1})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	email := "carol.straddle@exemplar.ie"
	line := strings.Repeat("q", 63) + "\n"
	head := strings.Repeat(line, agent.ChunkSize/len(line)+1)[:agent.ChunkSize-9] + " "
	file := head + email + "\nlast line\n"
	// The fake sandbox ignores write offsets: append instead.
	err = m.Use(ctx, testID, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: "/home/user/big.txt", Data: []byte(file[:agent.ChunkSize/2])}); err != nil {
			return err
		}
		_, err := sb.WriteFile(ctx, agent.WriteParams{Path: "/home/user/big.txt", Data: []byte(file[agent.ChunkSize/2:]), Append: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(head, "\n")
	args := json.RawMessage(fmt.Sprintf(`{"path":"big.txt","offset":%d,"limit":3}`, lines))
	r := New(m, Config{})
	v, err := r.Call(ctx, Call{Name: "read_file", Identity: testID, Args: args}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := v.(*ReadFileResult).Content
	if strings.Contains(got, "carol") || !strings.Contains(got, "[REDACTED:EMAIL]") || !strings.Contains(got, "last line") {
		t.Fatalf("read_file across chunks: %q", got)
	}
	if _, err := r.Call(ctx, Call{Name: "read_file", Identity: testID, Args: json.RawMessage(`{"path":"nope.txt"}`)}, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing file: %v", err)
	}
}
