package kubernetes

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/egress"
	"github.com/sandlot/sandlot/network/policy"
)

// fakeEgress caps every tenant at allowlists and names one secret.
type fakeEgress struct{}

func (fakeEgress) Prepare(_ context.Context, tenant string, p policy.Policy) (map[string]string, error) {
	if p.Mode.Normalize() == policy.Open {
		return nil, errors.New("open is not allowed")
	}
	return map[string]string{"API_KEY": "sandlot-secret-placeholder"}, nil
}

// TestEgressIdentity: without an egress key an allowlist is refused; with
// one, the pod gets a proxy URL whose credential is its own sandbox's, the
// secrets' placeholders, and the CA's certificate in its trust store,
// while the CA's key stays on the key Secret; EgressPeer then names the
// enrolled pod's address and the create's tenant and context.
func TestEgressIdentity(t *testing.T) {
	ctx := testCtx(t)
	c := newCluster(t)
	allow := &policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("example.com")}}
	spec := contexts.Spec{Template: "python", Network: allow,
		Labels: map[string]string{contexts.LabelTenant: "t1", contexts.LabelContext: "ctx-1"}}

	plain := c.provider(t, Config{EgressProxy: "sandlot.sandlot.svc:3128"})
	if _, err := plain.Create(ctx, spec); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("allowlist without an egress identity: %v, want failed_precondition", err)
	}

	key := []byte("0123456789abcdef0123456789abcdef")
	p := c.provider(t, Config{EgressProxy: "sandlot.sandlot.svc:3128", EgressKey: key, Egress: fakeEgress{}})
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer sb.Close()
	id := sb.ID()
	r, err := sb.Exec(ctx, agent.ExecParams{Shell: `echo "$HTTPS_PROXY"; echo "$API_KEY"; cat "$SSL_CERT_FILE" | grep -c 'BEGIN CERT'`}, nil)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) < 2 {
		t.Fatalf("exec output %q", r.Stdout)
	}
	u, err := url.Parse(lines[0])
	if err != nil || u.Host != "sandlot.sandlot.svc:3128" || u.User.Username() != id {
		t.Fatalf("HTTPS_PROXY %q: want the proxy with the sandbox's own id", lines[0])
	}
	if pw, _ := u.User.Password(); pw != egress.Credential(key, id) {
		t.Errorf("the proxy password is not the sandbox's credential")
	}
	if lines[1] != "sandlot-secret-placeholder" {
		t.Errorf("API_KEY %q: want the placeholder", lines[1])
	}
	s, err := c.res(gvrSecret).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secretData(s, secretCAKey); err != nil {
		t.Errorf("the key Secret has no egress CA key: %v", err)
	}

	other := c.provider(t, Config{EgressProxy: "sandlot.sandlot.svc:3128", EgressKey: key, Egress: fakeEgress{}})
	peer, err := other.EgressPeer(ctx, id)
	if err != nil {
		t.Fatalf("egress peer from another replica: %v", err)
	}
	if peer.Tenant != "t1" || peer.Context != "ctx-1" || len(peer.Addrs) != 1 || peer.CA == nil {
		t.Errorf("peer %+v", peer)
	}

	if _, err := p.Create(ctx, contexts.Spec{Template: "python", Network: &policy.Policy{Mode: policy.Open}}); err == nil {
		t.Errorf("a policy the cap refuses was given: %v", err)
	}
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	c.dropPods(ctx, t)
	if _, err := other.EgressPeer(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("egress peer after destroy: %v, want not_found", err)
	}
}
