package desktop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// keyRecorder is a desktop.Contexts that records the identities sessions
// are opened for and opens none.
type keyRecorder struct{ ids []contexts.Identity }

var errNoSandbox = errors.New("no sandbox in this test")

func (k *keyRecorder) Use(_ context.Context, id contexts.Identity, _ contexts.CreateOptions, _ func(context.Context, *contexts.Record, contexts.Sandbox) error) error {
	k.ids = append(k.ids, id)
	return errNoSandbox
}

func (k *keyRecorder) SetTTL(context.Context, string, string, time.Duration) (*contexts.Record, error) {
	return nil, errNoSandbox
}

func (k *keyRecorder) HealthCheckFailed(*contexts.Record) {}

// TestSessionKeyHasUser: a desktop session is keyed like an execution
// context, the user included (004 §2.1: the desktop and execution session
// key is {user_id}:{task_id}), so two users of one conversation open two
// desktops.
func TestSessionKeyHasUser(t *testing.T) {
	k := &keyRecorder{}
	dm := desktop.New(desktop.Config{Contexts: k})
	for _, u := range []string{"alice", "bob"} {
		if _, err := dm.Health(context.Background(), contexts.Identity{TenantID: "t1", UserID: u, ConversationID: "c1"}); !errors.Is(err, errNoSandbox) {
			t.Fatalf("Health of %s: %v", u, err)
		}
	}
	want := []contexts.Identity{
		{TenantID: "t1", UserID: "alice", ConversationID: "c1", PathID: desktop.PathPrefix + "main"},
		{TenantID: "t1", UserID: "bob", ConversationID: "c1", PathID: desktop.PathPrefix + "main"},
	}
	if d := cmp.Diff(want, k.ids); d != "" {
		t.Fatalf("session identities (-want +got):\n%s", d)
	}
}
