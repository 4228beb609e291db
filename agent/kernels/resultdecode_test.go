package kernels

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var plainResultSeeds = []string{
	`{"id": 1, "results": [], "error": null}`,
	`{"id": 12345, "results": [{"text": "2", "main": true}], "error": null}`,
	`{"id": -3, "results": [{"text": "'a b' [1, 2] {}", "main": true}], "error": null}`,
	`{"id": 0, "results": [{"text": "", "main": true}], "error": null}`,
	// Each of these must go to encoding/json (or be refused by both).
	`{"id": 01, "results": [], "error": null}`,
	`{"id": 1, "results": [], "error": null} `,
	`{"id": 1, "results": [], "error": null}}`,
	`{"id": 1, "results": [{"text": "a\"b", "main": true}], "error": null}`,
	`{"id": 1, "results": [{"text": "\u00e9", "main": true}], "error": null}`,
	`{"id": 1, "results": [{"text": "é", "main": true}], "error": null}`,
	`{"id": 1, "results": [{"text": "a", "main": true}], "error": {"name": "E", "value": "", "traceback": ""}}`,
	`{"id": 1, "results": [{"text": "a", "main": true}, {"text": "b"}], "error": null}`,
	`{"id": 1, "results": [{"text": "", "main": true}], "error": null, "id": 2}`,
	`{"id": 1234567890123456789, "results": [], "error": null}`,
	`{"id": 1, "results": [{"text": "tab	here", "main": true}], "error": null}`,
	`{"id": -, "results": [], "error": null}`,
	`{"id": 1.5, "results": [], "error": null}`,
	`{"id": 1, "results": [{"text": "", "main": true}], "error": null}{"id": 1, "results": [{"text": "", "main": true}], "error": null}`,
}

// Whatever the fast path accepts, encoding/json decodes to the same
// driverResult; what it refuses is left to encoding/json.
func checkPlainResult(t *testing.T, line string) {
	var fast driverResult
	if !decodePlainResult([]byte(line), &fast) {
		return
	}
	var ref driverResult
	if err := json.Unmarshal([]byte(line), &ref); err != nil {
		t.Fatalf("%q: the fast path took a line encoding/json refuses: %v", line, err)
	}
	if diff := cmp.Diff(ref, fast); diff != "" {
		t.Fatalf("%q: fast path differs from encoding/json (-want +got):\n%s", line, diff)
	}
}

func TestDecodePlainResult(t *testing.T) {
	accepted := 0
	for _, line := range plainResultSeeds {
		t.Run(line, func(t *testing.T) { checkPlainResult(t, line) })
		var dr driverResult
		if decodePlainResult([]byte(line), &dr) {
			accepted++
		}
	}
	if accepted != 4 {
		t.Errorf("the fast path took %d of the seeds, want the 4 plain ones", accepted)
	}
}

func FuzzPlainResult(f *testing.F) {
	for _, s := range plainResultSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) { checkPlainResult(t, line) })
}

func BenchmarkDecodeDriverResult(b *testing.B) {
	line := []byte(`{"id": 12345, "results": [{"text": "2", "main": true}], "error": null}`)
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var dr driverResult
			if err := json.Unmarshal(line, &dr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var dr driverResult
			if !decodePlainResult(line, &dr) {
				b.Fatal("not plain")
			}
		}
	})
}
