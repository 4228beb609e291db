package envd_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A client that accepts gzip gets a small Connect message as it is: a
// deflate stream of a stat's hundred bytes costs both ends more than it
// saves (about a millisecond of the E2B SDK's files.exists on a 2-core
// VM). A message of compressMinBytes or more is still compressed.
func TestSmallResponsesUncompressed(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	call := func(method, body string) (*http.Response, []byte) {
		t.Helper()
		resp := fsCall(e, sb, method, body, "Accept-Encoding", "gzip")
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, %v, body %.200q", method, resp.StatusCode, err, b)
		}
		return resp, b
	}
	call("MakeDir", `{"path":"/home/user/d"}`)
	resp, b := call("Stat", `{"path":"/home/user/d"}`)
	if ce := resp.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("a stat of %d bytes came with Content-Encoding %q, want none", len(b), ce)
	}
	if !json.Valid(b) {
		t.Errorf("stat body %.200q is not JSON", b)
	}

	const dirs = 40
	for i := range dirs {
		call("MakeDir", fmt.Sprintf(`{"path":"/home/user/d/%s-%02d"}`, strings.Repeat("x", 40), i))
	}
	resp, b = call("ListDir", `{"path":"/home/user/d","depth":1}`)
	if ce := resp.Header.Get("Content-Encoding"); ce != "gzip" {
		t.Fatalf("a listing of %d entries came with Content-Encoding %q, want gzip", dirs, ce)
	}
	zr, err := gzip.NewReader(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.NewDecoder(zr).Decode(&list); err != nil || len(list.Entries) != dirs {
		t.Fatalf("listing: %d entries, %v; want %d", len(list.Entries), err, dirs)
	}
}
