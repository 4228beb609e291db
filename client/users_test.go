package client_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
)

// TestUsers: every call that names a conversation carries the target's
// user, so two users of one conversation reach two contexts, and the
// listing, the files routes, path events and the end of a conversation
// are one user's.
func TestUsers(t *testing.T) {
	e, c, _ := setup(t)
	ctx := context.Background()
	for _, u := range []string{"alice", "bob"} {
		res, err := c.RunCode(ctx, client.RunCodeRequest{Target: client.Target{UserID: u, ConversationID: "c"}, Language: "python", Code: "1"})
		if err != nil || res.UserID != u {
			t.Fatalf("run as %s: %+v %v", u, res, err)
		}
	}
	alice := client.FileTarget{UserID: "alice", ConversationID: "c"}
	if _, err := c.Upload(ctx, alice, "f.txt", bytes.NewReader([]byte("alice-only"))); err != nil {
		t.Fatal(err)
	}
	var ids = map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		l, err := c.ListContexts(ctx, client.ListOptions{UserID: u})
		if err != nil || len(l.Contexts) != 1 || l.Contexts[0].UserID != u {
			t.Fatalf("contexts of %s: %+v %v", u, l, err)
		}
		ids[u] = l.Contexts[0].ID
	}
	if _, ok := e.Contexts.File(ids["alice"], "/home/user/f.txt"); !ok {
		t.Fatal("alice's upload is not in alice's context")
	}
	if _, ok := e.Contexts.File(ids["bob"], "/home/user/f.txt"); ok {
		t.Fatal("alice's upload reached bob's context")
	}
	var buf bytes.Buffer
	if _, err := c.Download(ctx, alice, "f.txt", &buf, nil); err != nil || buf.String() != "alice-only" {
		t.Fatalf("alice's download: %q %v", buf.String(), err)
	}
	if err := c.UserPathEvent(ctx, "bob", "c", "main", api.PathEvent{Type: api.PathDeleted}); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListContexts(ctx, client.ListOptions{ConversationID: "c", Status: []string{"active"}})
	if err != nil || len(l.Contexts) != 1 || l.Contexts[0].UserID != "alice" {
		t.Fatalf("active contexts after bob's path was deleted: %+v %v", l, err)
	}
	if n, err := c.EndUserConversation(ctx, "alice", "c"); err != nil || n != 1 {
		t.Fatalf("EndUserConversation(alice) = %d, %v", n, err)
	}
}
