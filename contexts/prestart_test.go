package contexts_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
)

// A context created by an Execute call boots with that call's kernel
// started (Spec.Prestart), so the kernel's start overlaps the host's
// connection to the sandbox; other creates start none, and a call on a
// context that exists changes nothing.
func TestExecuteCreatesWithItsKernel(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	for i, tc := range []struct {
		name string
		req  *contexts.ExecuteRequest // nil: GetOrCreate
		want []string
	}{
		{"python", &contexts.ExecuteRequest{Language: "python", Code: "1"}, []string{"python"}},
		{"python through IPython", &contexts.ExecuteRequest{Language: "python", Code: "1", IPython: true}, []string{"ipython"}},
		{"javascript", &contexts.ExecuteRequest{Language: "javascript", Code: "1"}, []string{"javascript"}},
		{"bash", &contexts.ExecuteRequest{Language: "bash", Code: "true"}, []string{"bash"}},
		{"sh has no kernel", &contexts.ExecuteRequest{Language: "sh", Code: "true"}, nil},
		{"a named kernel", &contexts.ExecuteRequest{Language: "python", Code: "1", Kernel: "k1"}, nil},
		{"another user's kernel", &contexts.ExecuteRequest{Language: "python", Code: "1", User: "root"}, nil},
		{"GetOrCreate", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := ident("t1", fmt.Sprintf("c%d", i), "main")
			var sandboxID string
			if tc.req == nil {
				sandboxID = e.getOrCreate(id).SandboxID
			} else {
				res, err := e.m.Execute(e.ctx, id, *tc.req, nil)
				if err != nil {
					t.Fatal(err)
				}
				sandboxID = res.SandboxID
			}
			sb, err := e.p.Attach(e.ctx, sandboxID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sb.(*contextstest.Sandbox).Spec().Prestart); diff != "" {
				t.Errorf("Spec.Prestart (-want +got):\n%s", diff)
			}
		})
	}
	// The context exists: a javascript call does not recreate it.
	id := ident("t1", "c0", "main")
	before := e.getOrCreate(id).SandboxID
	if res, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "javascript", Code: "1"}, nil); err != nil || res.SandboxID != before {
		t.Fatalf("second call: %+v, %v (sandbox %s before)", res, err, before)
	}
}
