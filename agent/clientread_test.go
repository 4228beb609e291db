package agent

import (
	"encoding/json"
	"testing"
)

// FuzzDiscardable: whatever discardable lets through unread (a result
// nothing decodes into: the ping ahead of a request, a dropped call), the
// general path accepts too, as encoding/json and DecodeFrame read it: a
// response to the same call with one result and no error.
func FuzzDiscardable(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":0,"result":null}`,
		`{"jsonrpc":"2.0","id":42,"result":{"ok":true,"n":[1,2.5e3,"x\u0041"]}}`,
		`{"jsonrpc":"2.0","id":7,"result": "a" }`,
		`{"jsonrpc":"2.0","id":07,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"result":1 2}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}}`,
		`{"jsonrpc":"2.0","id":1,"result":}`,
		`{"jsonrpc":"2.0","id":1,"result":"\}`,
		`{"jsonrpc":"2.0","id":18446744073709551615,"result":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		id, ok := resultHead(line)
		if !ok || !discardable(line) {
			return
		}
		rf := resultFrame{Result: new(json.RawMessage)}
		if err := json.Unmarshal(line, &rf); err != nil {
			t.Fatalf("discardable let through what encoding/json refuses (%v): %q", err, line)
		}
		if rf.JSONRPC != "2.0" || rf.ID == nil || *rf.ID != id || rf.Method != "" || rf.Error != nil {
			t.Fatalf("discardable let through a frame that is not a result for call %d: %q", id, line)
		}
		fr, err := DecodeFrame(line)
		if err != nil {
			t.Fatalf("discardable let through what DecodeFrame refuses (%v): %q", err, line)
		}
		if fr.ID == nil || *fr.ID != id || fr.Method != "" || fr.Error != nil || len(fr.Result) == 0 {
			t.Fatalf("DecodeFrame reads %q as something else than a result for call %d: %+v", line, id, fr)
		}
	})
}
