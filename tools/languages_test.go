package tools

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/templates"
)

// TestRunCodeLanguages: run_code's schema offers every language a
// template can offer, no more and no fewer.
func TestRunCodeLanguages(t *testing.T) {
	raw, err := schemaFS.ReadFile("schemas/run_code.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Language struct {
				Enum []string `json:"enum"`
			} `json:"language"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(templates.Languages, s.Properties.Language.Enum); diff != "" {
		t.Errorf("run_code's languages (-templates.Languages +schema):\n%s", diff)
	}
}
