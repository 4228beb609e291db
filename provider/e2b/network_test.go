package e2b_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/provider/e2b"
)

// TestCreateNetwork: the E2B cloud, whose default is open internet, is
// asked for internet off unless the sandbox's policy says otherwise; an
// allowlist goes as allowOut with all other traffic denied.
func TestCreateNetwork(t *testing.T) {
	var mu sync.Mutex
	var got map[string]json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = nil
		json.NewDecoder(r.Body).Decode(&got)
		mu.Unlock()
		http.Error(w, `{"code":500,"message":"stop here"}`, http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL})
	cases := []struct {
		name      string
		pol       *policy.Policy
		internet  string
		allowOut  []string
		denyOut   []string
		noRequest bool
	}{
		{name: "no policy", internet: "false"},
		{name: "mode none", pol: &policy.Policy{Mode: policy.None}, internet: "false"},
		{name: "allowlist", pol: &policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("pypi.org")}}, internet: "null",
			allowOut: []string{"pypi.org"}, denyOut: []string{policy.AllTraffic}},
		{name: "open", pol: &policy.Policy{Mode: policy.Open}, internet: "true"},
		{name: "secrets", pol: &policy.Policy{Mode: policy.Allowlist, Secrets: []string{"tok"}}, noRequest: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			_, err := p.Create(context.Background(), contexts.Spec{Network: c.pol})
			mu.Lock()
			defer mu.Unlock()
			if c.noRequest {
				if !errors.Is(err, errdefs.ErrFailedPrecondition) || got != nil {
					t.Fatalf("err %v, request %v", err, got)
				}
				return
			}
			if got == nil {
				t.Fatalf("no create request (err %v)", err)
			}
			if s := string(got["allow_internet_access"]); s != c.internet {
				t.Errorf("allow_internet_access = %s, want %s", s, c.internet)
			}
			var n policy.E2BNetwork
			if raw, ok := got["network"]; ok {
				json.Unmarshal(raw, &n)
			}
			if !slices.Equal(n.AllowOut, c.allowOut) || !slices.Equal(n.DenyOut, c.denyOut) {
				t.Errorf("network = %+v, want allowOut %v denyOut %v", n, c.allowOut, c.denyOut)
			}
		})
	}
}
