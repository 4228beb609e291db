package contexts_test

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// TestRealIdentityEnv: on the local provider, a context's sandbox has its
// identity in its environment, whether it came from the warm pool (told at
// claim: the pool's prestarted python kernel sees it in its runs) or was
// created for the context (a caller's env beside it); bash commands see it.
func TestRealIdentityEnv(t *testing.T) {
	e := newRealEnv(t, contexts.Config{PoolSize: 1})
	e.waitStats("pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	const py = "import os; print(os.environ['TENANT_ID'], os.environ['CONVERSATION_ID'], os.environ['PATH_ID'])"
	id := ident("t1", "c1", "main")
	if got := e.exec(id, "python", py); got.Stdout != "t1 c1 main\n" || e.m.Stats().PoolHits != 1 {
		t.Fatalf("a pooled sandbox's python: %+v (stats %+v)", got, e.m.Stats())
	}
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		r, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo $TENANT_ID/$CONVERSATION_ID/$PATH_ID"}, nil)
		if err == nil && r.Stdout != "t1/c1/main\n" {
			t.Errorf("a pooled sandbox's bash: %q", r.Stdout)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	other := ident("t1", "c2", "b2")
	if _, err := e.m.GetOrCreate(e.ctx, other, contexts.CreateOptions{Env: map[string]string{"MINE": "x"}}); err != nil {
		t.Fatal(err)
	}
	if got := e.exec(other, "python", py+"; print(os.environ['MINE'])"); got.Stdout != "t1 c2 b2\nx\n" {
		t.Fatalf("a created sandbox's python: %+v", got)
	}
	// A user is in the environment when the identity has one, and only
	// then.
	if got := e.exec(other, "python", "import os; print(os.environ.get('USER_ID', '-'))"); got.Stdout != "-\n" {
		t.Fatalf("a context without a user: USER_ID %+v", got)
	}
	alice := ident("t1", "c2", "b2")
	alice.UserID = "alice"
	if got := e.exec(alice, "python", py+"; print(os.environ['USER_ID'])"); got.Stdout != "t1 c2 b2\nalice\n" {
		t.Fatalf("alice's sandbox's python: %+v", got)
	}
}
