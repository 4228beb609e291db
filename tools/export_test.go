package tools

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestExport(t *testing.T) {
	r := New(newFake(t), Config{})
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			v, err := r.Export(format)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "export_"+format+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./tools -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("export %s differs from %s (-want +got):\n%s", format, golden, diff)
			}
			// Shape checks independent of the golden file.
			var list []map[string]any
			if err := json.Unmarshal(got, &list); err != nil {
				t.Fatal(err)
			}
			if len(list) != 11 {
				t.Fatalf("%d tools, want 11", len(list))
			}
			for _, e := range list {
				var schema map[string]any
				switch format {
				case FormatOpenAI:
					if e["type"] != "function" {
						t.Errorf("type = %v", e["type"])
					}
					schema, _ = e["function"].(map[string]any)["parameters"].(map[string]any)
				case FormatAnthropic:
					schema, _ = e["input_schema"].(map[string]any)
				case FormatMCP:
					schema, _ = e["inputSchema"].(map[string]any)
				}
				if schema == nil || schema["type"] != "object" {
					t.Errorf("%v: schema %v is not an object schema", e, schema)
				}
			}
		})
	}
	if _, err := r.Export("gemini"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Export(gemini) = %v, want invalid_argument", err)
	}
}

// TestExportOwn: format "" is the registry's own list, so the HTTP server
// takes the registry as it is (no adapter in between).
func TestExportOwn(t *testing.T) {
	r := New(newFake(t), Config{})
	v, err := r.Export("")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Tools(), v); diff != "" {
		t.Errorf("Export(\"\") differs from Tools() (-want +got):\n%s", diff)
	}
}
