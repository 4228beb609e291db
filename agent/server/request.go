package server

import (
	"bytes"
	"encoding/json"

	"github.com/sandlot/sandlot/agent"
)

// The host's Client writes every request in one layout,
// {"jsonrpc":"2.0","id":N,"method":"M","params":P}. parseRequest reads
// that layout by its bytes and checks only that P is one valid JSON value,
// which keeps the reflection of a general decode (a fifth of the agent's
// CPU on a warm run_code) off the hot path; the handler decodes P into its
// type as before. Any other layout (a notification, keys in another
// order, spaces) takes the general decode.
var (
	reqHead   = []byte(`{"jsonrpc":"2.0","id":`)
	methodKey = []byte(`,"method":"`)
	paramsKey = []byte(`","params":`)
)

// parseRequest decodes one request frame into r.
func parseRequest(line []byte, r *agent.Request) error {
	if fastRequest(line, r) {
		return nil
	}
	*r = agent.Request{}
	return json.Unmarshal(line, r)
}

// fastRequest fills r from a frame in the Client's layout and reports
// whether it was one.
func fastRequest(line []byte, r *agent.Request) bool {
	if !bytes.HasPrefix(line, reqHead) {
		return false
	}
	rest := line[len(reqHead):]
	var id uint64
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		if i == 19 { // 20 digits may overflow: the general decode says
			return false
		}
		id = id*10 + uint64(rest[i]-'0')
	}
	if i == 0 || (i > 1 && rest[0] == '0') || !bytes.HasPrefix(rest[i:], methodKey) {
		return false
	}
	rest = rest[i+len(methodKey):]
	j := 0
	for ; j < len(rest) && methodByte(rest[j]); j++ {
	}
	if j == 0 || !bytes.HasPrefix(rest[j:], paramsKey) || rest[len(rest)-1] != '}' {
		return false
	}
	params := rest[j+len(paramsKey) : len(rest)-1]
	if !json.Valid(params) {
		return false // the general decode reports it
	}
	r.JSONRPC = "2.0"
	r.ID = &id
	r.Method = methodName(rest[:j])
	// The line's buffer is reused by the next read; the params outlive it.
	r.Params = bytes.Clone(params)
	return true
}

// methodByte reports a byte a method name may hold without escaping.
func methodByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'
}

// methodName returns the hot methods' names without an allocation.
func methodName(b []byte) string {
	switch string(b) {
	case agent.MethodPing:
		return agent.MethodPing
	case agent.MethodRunCode:
		return agent.MethodRunCode
	case agent.MethodExec:
		return agent.MethodExec
	}
	return string(b)
}
