package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// testRef is the PathRef of testID, which every result carries.
var testRef = api.PathRef{ConversationID: testID.ConversationID, PathID: testID.PathID}

func call(t *testing.T, r *Registry, tool, args string) (any, error) {
	t.Helper()
	return r.Call(context.Background(), Call{Name: tool, Identity: testID, Args: json.RawMessage(args)}, nil)
}

func TestReadFile(t *testing.T) {
	f := newFake(t)
	var b strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	f.sb.files["a.txt"] = []byte(b.String())
	f.sb.files["short.txt"] = []byte("one\ntwo") // no final newline
	f.sb.files["bin"] = []byte("PK\x03\x04\x00\x00rest")
	f.sb.files["latin1"] = []byte("caf\xe9\n")
	r := New(f, Config{})

	cases := []struct {
		args string
		want ReadFileResult
	}{
		{`{"path":"a.txt","offset":3,"limit":2}`, ReadFileResult{PathRef: testRef, Path: "a.txt", Content: "line 3\nline 4\n", StartLine: 3, EndLine: 4, Size: int64(b.Len()), Truncated: true, TotalLines: 5000}},
		{`{"path":"short.txt"}`, ReadFileResult{PathRef: testRef, Path: "short.txt", Content: "one\ntwo", StartLine: 1, EndLine: 2, TotalLines: 2, Size: 7}},
		{`{"path":"short.txt","offset":5}`, ReadFileResult{PathRef: testRef, Path: "short.txt", StartLine: 5, EndLine: 4, TotalLines: 2, Size: 7}},
		{`{"path":"a.txt","offset":4999}`, ReadFileResult{PathRef: testRef, Path: "a.txt", Content: "line 4999\nline 5000\n", StartLine: 4999, EndLine: 5000, TotalLines: 5000, Size: int64(b.Len())}},
	}
	for _, tc := range cases {
		v, err := call(t, r, "read_file", tc.args)
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if diff := cmp.Diff(&tc.want, v); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.args, diff)
		}
	}
	// Default limit: 2000 lines.
	v, _ := call(t, r, "read_file", `{"path":"a.txt"}`)
	if res := v.(*ReadFileResult); res.EndLine != 2000 || !res.Truncated || !strings.HasSuffix(res.Content, "line 2000\n") {
		t.Errorf("default limit: end %d truncated %v", res.EndLine, res.Truncated)
	}
	// Only a recognised binary format is refused; Latin-1 is text.
	if _, err := call(t, r, "read_file", `{"path":"bin"}`); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "binary file (zip") {
		t.Errorf("bin: err = %v, want binary refusal", err)
	}
	if v, err := call(t, r, "read_file", `{"path":"latin1"}`); err != nil || v.(*ReadFileResult).Content != "caf\xe9\n" {
		t.Errorf("latin1: %v %+v", err, v)
	}
	if _, err := call(t, r, "read_file", `{"path":"missing"}`); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}

func TestReadFileStopsEarly(t *testing.T) {
	f := newFake(t)
	f.sb.files["big"] = []byte(strings.Repeat("0123456789abcdef\n", 3<<20/17)) // 3 MiB: 3 chunks
	r := New(f, Config{})
	v, err := call(t, r, "read_file", `{"path":"big","limit":10}`)
	if err != nil {
		t.Fatal(err)
	}
	if res := v.(*ReadFileResult); res.EndLine != 10 || !res.Truncated || res.TotalLines != 0 {
		t.Errorf("result: %+v", res)
	}
	if f.sb.reads != 1 {
		t.Errorf("%d chunk reads for 10 lines, want 1", f.sb.reads)
	}
}

func TestWriteAndEditFile(t *testing.T) {
	f := newFake(t)
	r := New(f, Config{})
	big := strings.Repeat("x", agent.ChunkSize*2+10)
	v, err := call(t, r, "write_file", `{"path":"big.txt","content":"`+big+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if res := v.(*WriteFileResult); !res.Success || res.Size != int64(len(big)) || string(f.sb.files["big.txt"]) != big || f.sb.writes != 3 {
		t.Errorf("chunked write: %+v, %d writes", res, f.sb.writes)
	}
	if _, err := call(t, r, "write_file", `{"path":"empty.txt","content":""}`); err != nil || f.sb.files["empty.txt"] == nil {
		t.Errorf("empty write: %v", err)
	}

	f.sb.files["a.py"] = []byte("x = 1\ny = 1\n")
	cases := []struct {
		args, wantErr string
		category      error
	}{
		{`{"path":"a.py","old_string":"= 1","new_string":"= 2"}`, "edit_file: a.py: old_string is not unique; pass replace_all or more context", errdefs.ErrFailedPrecondition},
		{`{"path":"a.py","old_string":"z = 1","new_string":"z = 2"}`, "edit_file: a.py: old_string not found", errdefs.ErrNotFound},
		{`{"path":"nope.py","old_string":"a","new_string":"b"}`, "edit_file: nope.py: file not found", errdefs.ErrNotFound},
		{`{"path":"a.py","old_string":"a","new_string":"a"}`, "edit_file: old_string and new_string are the same", errdefs.ErrInvalidArgument},
	}
	for _, tc := range cases {
		_, err := call(t, r, "edit_file", tc.args)
		if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || !errors.Is(err, tc.category) {
			t.Errorf("%s: err = %v, want %q (%v)", tc.args, err, tc.wantErr, tc.category)
		}
	}
	v, err = call(t, r, "edit_file", `{"path":"a.py","old_string":"= 1","new_string":"= 2","replace_all":true}`)
	if err != nil || v.(*EditFileResult).Replacements != 2 || string(f.sb.files["a.py"]) != "x = 2\ny = 2\n" {
		t.Errorf("replace_all: %v %+v %q", err, v, f.sb.files["a.py"])
	}
}

func TestListGlobGrepBash(t *testing.T) {
	f := newFake(t)
	f.sb.files["b"] = []byte("12")
	f.sb.files["a"] = []byte("1")
	f.sb.exec = func(p agent.ExecParams) *agent.ExecResult {
		return &agent.ExecResult{ExitCode: 3, Stdout: p.Shell + "@" + p.Cwd, Stderr: "oops", DurationMs: 7}
	}
	r := New(f, Config{})

	v, err := call(t, r, "list_files", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	want := &ListFilesResult{PathRef: testRef, Path: "/home/user", Entries: []FileEntry{{Name: "a", Path: "a", Type: "file", Size: 1}, {Name: "b", Path: "b", Type: "file", Size: 2}}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("list_files (-want +got):\n%s", diff)
	}
	v, err = call(t, r, "glob", `{"pattern":"**/*.py","path":"src"}`)
	if err != nil || v.(*GlobResult).Paths[0] != "src|**/*.py" {
		t.Errorf("glob: %v %+v", err, v)
	}
	v, err = call(t, r, "grep", `{"pattern":"x+"}`)
	if res := v.(*GrepResult); err != nil || !res.Truncated || len(res.Matches[0].Text) > maxGrepLine+100 {
		t.Errorf("grep long line: %v %+v", err, v)
	}
	if _, err := call(t, r, "grep", `{"pattern":"(unclosed"}`); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad regex: %v", err)
	}
	v, err = call(t, r, "bash", `{"command":"ls","cwd":"/tmp"}`)
	want2 := &BashResult{PathRef: testRef, ExitCode: 3, Stdout: "ls@/tmp", Stderr: "oops", ExecutionTimeMs: 7, SandboxID: "fake-sb", OutputType: OutputError}
	if diff := cmp.Diff(want2, v); err != nil || diff != "" {
		t.Errorf("bash: %v (-want +got):\n%s", err, diff)
	}
}
