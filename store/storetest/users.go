package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
)

// testUsers checks the user in the identity (004 §2.1): two users of one
// tenant who name the same conversation and path hold two active
// contexts, one user holds one, and "" (no user) is a user of its own
// whose key is the key of a store without users. Reads, counts and
// listings keep the user.
func testUsers(t *testing.T, s store.Backend) {
	ctx := context.Background()
	user := func(u string) contexts.Identity {
		id := ident("A", "c1", "main")
		id.UserID = u
		return id
	}
	alice := mustCreate(t, s, newRec(user("alice")))
	bob := mustCreate(t, s, newRec(user("bob")))
	none := mustCreate(t, s, newRec(user("")))
	if alice.ID == bob.ID || alice.ID == none.ID {
		t.Fatalf("two users share context %s", alice.ID)
	}
	for _, u := range []string{"alice", "bob", ""} {
		err := s.Create(ctx, newRec(user(u)))
		if !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Fatalf("second active context of user %q: err = %v, want already_exists", u, err)
		}
	}
	for _, tc := range []struct {
		user string
		want *contexts.Record
	}{{"alice", alice}, {"bob", bob}, {"", none}} {
		got, err := s.GetActive(ctx, user(tc.user))
		if err != nil {
			t.Fatalf("GetActive(user %q): %v", tc.user, err)
		}
		if got.ID != tc.want.ID || got.UserID != tc.user {
			t.Fatalf("GetActive(user %q) = %s of user %q; want %s", tc.user, got.ID, got.UserID, tc.want.ID)
		}
		if g := mustGet(t, s, tc.want.ID); g.UserID != tc.user {
			t.Fatalf("Get(%s).UserID = %q; want %q", tc.want.ID, g.UserID, tc.user)
		}
	}
	if _, err := s.GetActive(ctx, user("carol")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("GetActive(user carol): err = %v, want not_found", err)
	}

	for _, tc := range []struct {
		user, conv string
		want       int
	}{{"alice", "c1", 1}, {"bob", "c1", 1}, {"", "c1", 1}, {"carol", "c1", 0}, {"alice", "", 3}} {
		if n, err := s.CountActive(ctx, "A", tc.user, tc.conv); err != nil || n != tc.want {
			t.Errorf("CountActive(A, %q, %q) = %d, %v; want %d", tc.user, tc.conv, n, err, tc.want)
		}
	}

	for _, tc := range []struct {
		name string
		f    contexts.Filter
		want []string
	}{
		{"any user", contexts.Filter{TenantID: "A", ConversationID: "c1"}, []string{alice.ID, bob.ID, none.ID}},
		{"alice", contexts.Filter{TenantID: "A", UserID: "alice"}, []string{alice.ID}},
		{"no user", contexts.Filter{TenantID: "A", ByUser: true}, []string{none.ID}},
		{"carol", contexts.Filter{TenantID: "A", UserID: "carol"}, []string{}},
	} {
		got, err := s.List(ctx, tc.f)
		if err != nil {
			t.Fatalf("List(%s): %v", tc.name, err)
		}
		if d := cmp.Diff(sorted(tc.want), sorted(ids(got))); d != "" {
			t.Errorf("List(%s) (-want +got):\n%s", tc.name, d)
		}
	}

	// Ending one user's context frees that user's key only.
	if ok, err := s.Terminate(ctx, alice.ID, contexts.ReasonManual, base, ""); err != nil || !ok {
		t.Fatalf("Terminate(alice) = %v, %v", ok, err)
	}
	again := mustCreate(t, s, newRec(user("alice")))
	if got, err := s.GetActive(ctx, user("bob")); err != nil || got.ID != bob.ID {
		t.Fatalf("GetActive(bob) after alice's recreate = %v, %v; want %s", got, err, bob.ID)
	}
	if again.ID == alice.ID {
		t.Fatal("recreated context kept the ended one's id")
	}
}

func sorted(v []string) []string {
	out := append([]string{}, v...)
	slices.Sort(out)
	return out
}

// LegacyContextID is the active context of tenant "t", conversation "c",
// path "main" (sandbox "sb-1") that an upgrade test writes with the
// schema before users (version 9) for CheckLegacyUser.
const LegacyContextID = "6d1f3a52-0c8e-4f55-9d5a-1b2c3d4e5f61"

// CheckLegacyUser checks a store opened on a schema written before users
// existed, holding LegacyContextID: the record has no user and keeps its
// key (a second active context of it with no user is refused), and a user
// who names the same conversation gets a context of its own.
func CheckLegacyUser(t *testing.T, s store.Backend) {
	t.Helper()
	ctx := context.Background()
	id := ident("t", "c", "main")
	rec, err := s.GetActive(ctx, id)
	if err != nil || rec.ID != LegacyContextID || rec.UserID != "" || rec.SandboxID != "sb-1" {
		t.Fatalf("GetActive of the record from before users = %+v, %v", rec, err)
	}
	err = s.Create(ctx, newRec(id))
	wantErr(t, "a second context of the key from before users", err, errdefs.ErrAlreadyExists)
	id.UserID = "alice"
	alice := mustCreate(t, s, newRec(id))
	if alice.ID == LegacyContextID {
		t.Fatal("user alice got the context from before users")
	}
	if n, err := s.CountActive(ctx, "t", "", "c"); err != nil || n != 1 {
		t.Fatalf("CountActive(t, no user, c) = %d, %v; want 1", n, err)
	}
}
