package contexts_test

import (
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

func userIdent(user, conv string) contexts.Identity {
	id := ident("t1", conv, "main")
	id.UserID = user
	return id
}

// TestUsersKeyContexts: two users of one tenant who name the same
// conversation get two contexts on two sandboxes; one user gets one; no
// user is a user of its own.
func TestUsersKeyContexts(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	alice := e.getOrCreate(userIdent("alice", "c1"))
	bob := e.getOrCreate(userIdent("bob", "c1"))
	none := e.getOrCreate(userIdent("", "c1"))
	if alice.ID == bob.ID || alice.SandboxID == bob.SandboxID || none.ID == alice.ID {
		t.Fatalf("users share a context: alice %s/%s, bob %s/%s, none %s", alice.ID, alice.SandboxID, bob.ID, bob.SandboxID, none.ID)
	}
	if again := e.getOrCreate(userIdent("alice", "c1")); again.ID != alice.ID {
		t.Fatalf("alice's second call got %s, want her context %s", again.ID, alice.ID)
	}
	if alice.UserID != "alice" || none.UserID != "" {
		t.Fatalf("records: alice's user %q, none's %q", alice.UserID, none.UserID)
	}
	got, err := e.m.Lookup(e.ctx, userIdent("bob", "c1"))
	if err != nil || got.ID != bob.ID {
		t.Fatalf("Lookup(bob) = %v, %v; want %s", got, err, bob.ID)
	}
	list, err := e.m.List(e.ctx, contexts.Filter{TenantID: "t1", UserID: "alice"})
	if err != nil || len(list) != 1 || list[0].ID != alice.ID {
		t.Fatalf("List(alice) = %v, %v", list, err)
	}
}

// TestUserConversationLimit: the per-conversation limit counts one user's
// conversation, so one user cannot use up another's.
func TestUserConversationLimit(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerConversation: 1})
	e.getOrCreate(userIdent("alice", "c1"))
	id := userIdent("alice", "c1")
	id.PathID = "b1"
	_, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrResourceExhausted)
	e.getOrCreate(userIdent("bob", "c1"))
	e.getOrCreate(userIdent("", "c1"))
}

// TestUserValidation: a user id follows the rules of the other identity
// parts; bad ones are invalid_argument before anything is created.
func TestUserValidation(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	for _, tc := range []struct{ name, user, want string }{
		{"too long", strings.Repeat("u", 257), "userId is longer than 256 bytes"},
		{"control character", "al\nice", "userId contains a control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.m.GetOrCreate(e.ctx, userIdent(tc.user, "c1"), contexts.CreateOptions{})
			wantCategory(t, err, errdefs.ErrInvalidArgument)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to say %q", err, tc.want)
			}
		})
	}
	if list, _ := e.m.List(e.ctx, contexts.Filter{TenantID: "t1"}); len(list) != 0 {
		t.Fatalf("refused users left contexts: %v", list)
	}
	e.getOrCreate(userIdent(strings.Repeat("u", 256), "c1"))
}

// TestUserIdentityEnv: a sandbox learns its user (USER_ID) only when its
// identity has one.
func TestUserIdentityEnv(t *testing.T) {
	if env := contexts.IdentityEnv(userIdent("alice", "c1")); env[contexts.EnvUserID] != "alice" {
		t.Fatalf("env of alice's context = %v", env)
	}
	if _, ok := contexts.IdentityEnv(userIdent("", "c1"))[contexts.EnvUserID]; ok {
		t.Fatal("a context without a user has USER_ID")
	}
}
