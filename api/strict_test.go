package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// TestDecodeStrict: each mistake in a body reads as one sentence naming
// the field, never Go's type names, and is invalid_argument.
func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"conversation_id":"c"}`, `unknown field "conversation_id" (allowed: args, conversationId, network, pathId, secrets, taskId, userId)`},
		{`{"args":{}, "lang":"python"}`, `unknown field "lang" (allowed: `},
		{`{"conversationId":5}`, `field "conversationId" must be a string, not a number`},
		{`{"secrets":[]}`, `field "secrets" must be an object, not an array`},
		{`[1]`, `the body must be a JSON object, not array`},
		{`{"conversationId":"c"`, `not valid JSON: it ends early`},
		{`{"conversationId":"c"} {}`, `not valid JSON: data after the value`},
		{`{x}`, `not valid JSON (invalid character 'x'`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var req ToolRequest
			err := UnmarshalStrict([]byte(tc.in), &req)
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("err %v, want invalid_argument", err)
			}
			msg := errdefs.PublicMessage(err)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want %q", msg, tc.want)
			}
			for _, leak := range []string{"json:", "Go struct", "api.", "invalid argument"} {
				if strings.Contains(msg, leak) {
					t.Errorf("message %q has %q", msg, leak)
				}
			}
		})
	}
	var req ToolRequest
	if err := UnmarshalStrict(nil, &req); err != nil {
		t.Errorf("empty body: %v", err)
	}
}
