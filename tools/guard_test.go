package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/guardtest"
	"github.com/sandlot/sandlot/store/memory"
)

// guardedRegistry is a registry over the real Manager and guard (memory
// store, fake provider), as `sandlot serve` wires them.
func guardedRegistry(t *testing.T, prov *contextstest.Provider, cfg Config) (*Registry, *contexts.Manager) {
	t.Helper()
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), prov, contexts.Config{Guard: g, PoolSize: -1})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return New(m, cfg), m
}

// putFile writes data in two appends (the fake sandbox ignores offsets).
func putFile(t *testing.T, m *contexts.Manager, path string, data []byte) {
	t.Helper()
	err := m.Use(context.Background(), testID, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		half := len(data) / 2
		if _, err := sb.WriteFile(ctx, agent.WriteParams{Path: path, Data: data[:half]}); err != nil {
			return err
		}
		_, err := sb.WriteFile(ctx, agent.WriteParams{Path: path, Data: data[half:], Append: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadFileTextWithBinaryBytes: a NUL or an invalid UTF-8 byte does not
// make a text file binary: read_file returns it redacted.
func TestReadFileTextWithBinaryBytes(t *testing.T) {
	r, m := guardedRegistry(t, contextstest.NewProvider(), Config{})
	text, red := guardtest.SecretText()
	for _, tc := range []struct{ name, prefix string }{
		{"NUL prefix", "\x00"},
		{"invalid UTF-8 prefix", "\xff"},
		{"latin-1", "caf\xe9 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			putFile(t, m, "/home/user/f.txt", []byte(tc.prefix+text))
			v, err := call(t, r, "read_file", `{"path":"f.txt"}`)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.(*ReadFileResult).Content; got != tc.prefix+red {
				t.Fatalf("read_file = %q, want %q", got, tc.prefix+red)
			}
		})
	}
	t.Run("a PNG is refused", func(t *testing.T) {
		putFile(t, m, "/home/user/p.png", guardtest.PNG("Comment", "x"))
		if _, err := call(t, r, "read_file", `{"path":"p.png"}`); err == nil || !strings.Contains(err.Error(), "binary file") {
			t.Fatalf("read_file of a PNG: %v", err)
		}
	})
}

// TestReadFileLargeExact: a 3 MiB file with secrets at the chunk
// boundaries reads back as the original with each secret replaced.
func TestReadFileLargeExact(t *testing.T) {
	r, m := guardedRegistry(t, contextstest.NewProvider(), Config{MaxOutput: 8 << 20})
	file, want := guardtest.LargeText(3<<20, agent.ChunkSize)
	putFile(t, m, "/home/user/big.txt", []byte(file))
	v, err := call(t, r, "read_file", `{"path":"big.txt","limit":100000}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(*ReadFileResult).Content; got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%d bytes, want %d; first difference at %d", len(got), len(want), i)
	}
}

// TestRunCodeImageResults: PNG and JPEG results must be images. One that
// is not is dropped, with a marker in its text; the text in a real
// image's metadata (PNG tEXt, JPEG COM) is scanned, and a chunk or
// segment with a finding is removed while the image still decodes.
func TestRunCodeImageResults(t *testing.T) {
	tok, email := guardtest.GitHubToken(), guardtest.Email()
	b64 := base64.StdEncoding.EncodeToString
	prov := contextstest.NewProvider()
	prov.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		return &agent.RunCodeResult{Success: true, Results: []agent.RichResult{
			{PNG: b64([]byte("not a png: " + tok))},
			{PNG: b64(guardtest.PNG("Comment", "plotted for "+email)), Text: "<Figure>"},
			{JPEG: b64(guardtest.JPEG("shot by " + email))},
			{PNG: b64(guardtest.PNG("Software", "matplotlib version 3.6.3"))},
		}}, nil
	}
	r, _ := guardedRegistry(t, prov, Config{})
	v, err := call(t, r, "run_code", `{"language":"python","code":"plot()"}`)
	if err != nil {
		t.Fatal(err)
	}
	res := v.(*RunCodeResult)
	if len(res.Results) != 4 {
		t.Fatalf("%d results", len(res.Results))
	}
	decode := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, rr := range res.Results {
		all, _ := json.Marshal(rr)
		all = append(all, decode(rr.PNG)...)
		all = append(all, decode(rr.JPEG)...)
		for _, s := range []string{tok, email} {
			if bytes.Contains(all, []byte(s)) {
				t.Errorf("result %d leaks %q", i, s)
			}
		}
	}
	if rr := res.Results[0]; rr.PNG != "" || !strings.Contains(rr.Text, "[REDACTED:INVALID_IMAGE]") {
		t.Errorf("not a PNG: %+v", rr)
	}
	if rr := res.Results[1]; rr.Text != "<Figure>" {
		t.Errorf("figure text = %q", rr.Text)
	} else if _, err := png.Decode(bytes.NewReader(decode(rr.PNG))); err != nil {
		t.Errorf("guarded PNG does not decode: %v", err)
	}
	if _, err := jpeg.Decode(bytes.NewReader(decode(res.Results[2].JPEG))); err != nil {
		t.Errorf("guarded JPEG does not decode: %v", err)
	}
	if got := decode(res.Results[3].PNG); !bytes.Contains(got, []byte("matplotlib version 3.6.3")) {
		t.Errorf("a clean tEXt chunk was removed")
	}
}
