package kubernetes

import (
	"context"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestApply: the NetworkPolicy that exists is given this process's spec
// when it differs, not when it differs only by what the API server fills
// in, and an update that meets a conflict (another replica updated it
// between the read and the write, as two replicas' first creates do) is
// read again and retried; before, the conflict failed the create as
// unavailable.
func TestApply(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// have is the spec the server holds before the apply.
		have func(want map[string]any) map[string]any
		// conflicts is how many updates answer a conflict first.
		conflicts   int
		wantUpdates int // update calls that succeed
	}{
		{"the same spec and fields only the server's copy has", func(w map[string]any) map[string]any {
			s := runtime.DeepCopyJSONValue(w).(map[string]any)
			// Fields this spec leaves out, as defaults fill them in.
			s["egress"].([]any)[0].(map[string]any)["ports"].([]any)[0].(map[string]any)["endPort"] = int64(3128)
			s["ingress"].([]any)[0].(map[string]any)["ports"] = []any{}
			return s
		}, 0, 0},
		{"another port", func(w map[string]any) map[string]any {
			s := runtime.DeepCopyJSONValue(w).(map[string]any)
			s["egress"].([]any)[0].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"] = int64(8080)
			return s
		}, 0, 1},
		{"a conflict, then another port", func(w map[string]any) map[string]any {
			s := runtime.DeepCopyJSONValue(w).(map[string]any)
			s["egress"] = []any{}
			return s
		}, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds)
			p, err := New(Config{Client: client, Namespace: "ns", EgressProxy: "proxy.ns.svc:3128"})
			if err != nil {
				t.Fatal(err)
			}
			want := p.networkPolicy()
			have := want.DeepCopy()
			have.Object["spec"] = tc.have(want.Object["spec"].(map[string]any))
			have.SetNamespace("ns")
			if _, err := client.Resource(gvrNetworkPolicy).Namespace("ns").Create(ctx, have, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var conflicts, updates atomic.Int32
			client.PrependReactor("update", "networkpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if int(conflicts.Add(1)) <= tc.conflicts {
					return true, nil, apierrors.NewConflict(gvrNetworkPolicy.GroupResource(), networkName, nil)
				}
				updates.Add(1)
				return false, nil, nil // the tracker's update
			})
			if err := p.apply(ctx, gvrNetworkPolicy, want, true); err != nil {
				t.Fatalf("apply: %v", err)
			}
			if got := int(updates.Load()); got != tc.wantUpdates {
				t.Errorf("updates: %d, want %d", got, tc.wantUpdates)
			}
			got, err := client.Resource(gvrNetworkPolicy).Namespace("ns").Get(ctx, networkName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !covers(got.Object["spec"], want.Object["spec"]) {
				t.Errorf("the policy after apply: %v, want %v", got.Object["spec"], want.Object["spec"])
			}
		})
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		have, want any
		ok         bool
	}{
		{"equal", map[string]any{"a": "x"}, map[string]any{"a": "x"}, true},
		{"a default added", map[string]any{"a": "x", "b": "y"}, map[string]any{"a": "x"}, true},
		{"a field missing", map[string]any{}, map[string]any{"a": "x"}, false},
		{"an empty field missing", map[string]any{}, map[string]any{"a": []any{}, "b": map[string]any{}}, true},
		{"another value", map[string]any{"a": "y"}, map[string]any{"a": "x"}, false},
		{"numbers by value", map[string]any{"n": int64(3)}, map[string]any{"n": 3}, true},
		{"a list longer", []any{"a", "b"}, []any{"a"}, false},
		{"a list element with a default", []any{map[string]any{"p": 1, "q": "TCP"}}, []any{map[string]any{"p": 1}}, true},
		{"a type changed", map[string]any{"a": []any{}}, map[string]any{"a": map[string]any{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := covers(tc.have, tc.want); got != tc.ok {
				t.Errorf("covers(%v, %v) = %v, want %v", tc.have, tc.want, got, tc.ok)
			}
		})
	}
}
