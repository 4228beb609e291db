package server

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
)

// TestParseRequest: the byte-level read of the Client's layout gives what
// the general decode gives, and every other frame (or a malformed one)
// goes to the general decode, which accepts or refuses it as before.
func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		fast       bool // read by the byte-level path
	}{
		{"run_code", `{"jsonrpc":"2.0","id":12,"method":"kernel.run","params":{"language":"python","code":"1+1"}}`, true},
		{"ping", `{"jsonrpc":"2.0","id":3,"method":"ping","params":{}}`, true},
		{"params scalar", `{"jsonrpc":"2.0","id":3,"method":"fs.stat","params":"x"}`, true},
		{"params with braces in strings", `{"jsonrpc":"2.0","id":9,"method":"exec","params":{"shell":"echo }\"}"}}`, true},
		{"largest id", `{"jsonrpc":"2.0","id":1234567890123456789,"method":"ping","params":{}}`, true},
		{"id too long", `{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping","params":{}}`, false},
		{"id leading zero", `{"jsonrpc":"2.0","id":012,"method":"ping","params":{}}`, false},
		{"notification", `{"jsonrpc":"2.0","method":"cancel","params":{"ref":4}}`, false},
		{"keys reordered", `{"id":5,"jsonrpc":"2.0","method":"ping","params":{}}`, false},
		{"extra key after params", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{},"id":6}`, false},
		{"escaped method", `{"jsonrpc":"2.0","id":5,"method":"pi\u006eg","params":{}}`, false},
		{"no params", `{"jsonrpc":"2.0","id":5,"method":"ping"}`, false},
		{"bad params", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":}}`, false},
		{"trailing garbage", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{}}}`, false},
		{"not json", `hello`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fast agent.Request
			if got := fastRequest([]byte(tc.line), &fast); got != tc.fast {
				t.Fatalf("fastRequest = %v, want %v", got, tc.fast)
			}
			var want agent.Request
			werr := json.Unmarshal([]byte(tc.line), &want)
			line := []byte(tc.line)
			var got agent.Request
			gerr := parseRequest(line, &got)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("parseRequest error %v, the general decode's %v", gerr, werr)
			}
			if werr != nil {
				return
			}
			for i := range line { // the params must not alias the reused read buffer
				line[i] = 'x'
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("parseRequest differs from the general decode (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkParseRequest(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12,"method":"kernel.run","params":{"language":"python","code":"1+1","timeoutMs":30000}}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var r agent.Request
			_ = parseRequest(line, &r)
		}
	})
	b.Run("general", func(b *testing.B) {
		for b.Loop() {
			var r agent.Request
			_ = json.Unmarshal(line, &r)
		}
	})
}
