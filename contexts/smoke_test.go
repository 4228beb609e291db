package contexts_test

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	p := contextstest.NewProvider()
	m := contexts.NewManager(memory.New(), p, contexts.Config{})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	id := contexts.Identity{TenantID: "t1", ConversationID: "c1"}
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "x = 5"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print(x)"}, nil)
	if err != nil || res.Stdout != "5\n" {
		t.Fatal(res, err)
	}
	t.Logf("%+v %+v", res, m.Stats())
}
