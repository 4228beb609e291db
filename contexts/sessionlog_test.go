package contexts_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestSessionKeyIsLogged: creating a context and reusing it each write a
// debug line that names the session's key (tenant, user when set,
// conversation, path), so a log query for a conversation finds where its
// sandbox came from.
func TestSessionKeyIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   contexts.Identity
	}{
		{"with a user", contexts.Identity{TenantID: "t1", UserID: "alice", ConversationID: "conv-1", PathID: "p1"}},
		{"without a user", contexts.Identity{TenantID: "t1", ConversationID: "conv-2", PathID: "default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.Buffer
			e := newEnv(t, contexts.Config{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			created := e.getOrCreate(tc.id)
			if again := e.getOrCreate(tc.id); again.ID != created.ID {
				t.Fatalf("second call got context %s, want the reuse of %s", again.ID, created.ID)
			}
			want := map[string]any{
				"tenant_id": tc.id.TenantID, "conversation_id": tc.id.ConversationID, "path_id": tc.id.PathID,
				"context_id": created.ID, "sandbox_id": created.SandboxID,
			}
			if tc.id.UserID != "" {
				want["user_id"] = tc.id.UserID
			}
			for _, msg := range []string{"context created", "context reused"} {
				line := findLine(t, logs.String(), msg)
				if line == nil {
					t.Fatalf("no %q line in:\n%s", msg, logs.String())
				}
				if line["level"] != "DEBUG" {
					t.Errorf("%q logged at %v, want DEBUG", msg, line["level"])
				}
				got := map[string]any{}
				for k := range want {
					if v, ok := line[k]; ok {
						got[k] = v
					}
				}
				if _, ok := line["user_id"]; ok && tc.id.UserID == "" {
					got["user_id"] = line["user_id"]
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%q line's session key (-want +got):\n%s", msg, d)
				}
			}
		})
	}
}

// findLine returns the first JSON log line whose msg is msg.
func findLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			return m
		}
	}
	return nil
}
