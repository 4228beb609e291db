package control_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// Create bodies the E2B SDKs send by default, byte for byte.
const (
	// Python SDK 2.33, Sandbox.create() (POST /sandboxes).
	pythonCreate = `{"templateID":"base","allow_internet_access":true,"autoPause":false,"autoResume":{"enabled":false},"envVars":{},"metadata":{},"secure":true,"timeout":300}`
	// JS SDK 2.45, Sandbox.create('base') (POST /sandboxes; undefined
	// fields are left out).
	js245Create = `{"templateID":"base","timeout":300,"secure":true,"allow_internet_access":true}`
)

// caps is the operator's cap as a daemon checks it (a daemon without
// --network checks policies the same way, daemon's policyOnly).
type caps struct{ op *policy.Operator }

func (c caps) Check(tenant string, p policy.Policy) error {
	_, err := c.op.Apply(tenant, p)
	return err
}

func (c caps) Update(context.Context, string, string, policy.Policy) (*policy.Effective, error) {
	return nil, errdefs.ErrFailedPrecondition
}

// capEnv serves the handler over a manager whose networks are checked
// against op; domain "" is a daemon that serves no ports (no --network).
func capEnv(t *testing.T, op *policy.Operator, domain string) *env {
	t.Helper()
	return e2bcompattest.NewEnv(t, e2bcompattest.Options{Manager: contexts.Config{Networks: caps{op}},
		Config: e2bcompat.Config{Domain: domain}})
}

// info is what getInfo says of a sandbox's network.
type info struct {
	AllowInternetAccess *bool              `json:"allowInternetAccess"`
	Network             *policy.E2BNetwork `json:"network"`
}

func ptr[T any](v T) *T { return &v }

// TestSDKDefaultInternet: the create the Python SDK and the JS SDK before
// 2.51 send on every call (allow_internet_access true) is a request, met
// up to the operator's cap: on a daemon with default settings (no mode
// open, no ports) it gets a sandbox without a network, and getInfo says
// so. It failed before (403 "open internet access is not allowed for this
// tenant"). What a request names beyond the cap stays a 403.
func TestSDKDefaultInternet(t *testing.T) {
	closed := &policy.Operator{}
	openCap := &policy.Operator{Default: policy.TenantCap{AllowOpen: true}}
	noPublic := &policy.Operator{Default: policy.TenantCap{NoPublicPorts: true}}
	narrow := &policy.Operator{Default: policy.TenantCap{Domains: []string{"*.pypi.org"}}}
	cases := []struct {
		name   string
		op     *policy.Operator
		domain string
		path   string
		body   string
		status int
		// the sandbox's record and getInfo, when created
		want     *policy.Policy
		wantInfo info
	}{
		{name: "python default, default daemon", op: closed, path: "/sandboxes", body: pythonCreate, status: 201,
			wantInfo: info{AllowInternetAccess: ptr(false)}},
		{name: "js 2.45 default, default daemon", op: closed, path: "/sandboxes", body: js245Create, status: 201,
			wantInfo: info{AllowInternetAccess: ptr(false)}},
		{name: "python default, ports served, closed cap", op: closed, domain: "sandlot.localhost", path: "/sandboxes", body: pythonCreate, status: 201,
			want:     &policy.Policy{Mode: policy.None, Ingress: policy.Ingress{Public: true}},
			wantInfo: info{AllowInternetAccess: ptr(false), Network: &policy.E2BNetwork{AllowPublicTraffic: ptr(true)}}},
		{name: "python default, cap allows open", op: openCap, domain: "sandlot.localhost", path: "/sandboxes", body: pythonCreate, status: 201,
			want:     &policy.Policy{Mode: policy.Open, Ingress: policy.Ingress{Public: true}},
			wantInfo: info{AllowInternetAccess: ptr(true), Network: &policy.E2BNetwork{AllowPublicTraffic: ptr(true)}}},
		{name: "python default, cap forbids public ports", op: noPublic, domain: "sandlot.localhost", path: "/sandboxes", body: pythonCreate, status: 201,
			want:     &policy.Policy{Mode: policy.None},
			wantInfo: info{AllowInternetAccess: ptr(false), Network: &policy.E2BNetwork{AllowPublicTraffic: ptr(false)}}},
		{name: "allowOut with the SDK default: an allowlist under a closed cap", op: closed, domain: "sandlot.localhost", path: "/v2/sandboxes",
			body: `{"templateID":"base","allow_internet_access":true,"network":{"allowOut":["pypi.org"],"allowPublicTraffic":false}}`, status: 201,
			want:     &policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{{Domain: "pypi.org"}}},
			wantInfo: info{Network: &policy.E2BNetwork{AllowOut: []string{"pypi.org"}, DenyOut: []string{policy.AllTraffic}, AllowPublicTraffic: ptr(false)}}},
		{name: "allowOut outside the cap's domains", op: narrow, domain: "sandlot.localhost", path: "/v2/sandboxes",
			body: `{"templateID":"base","allow_internet_access":true,"network":{"allowOut":["evil.test"]}}`, status: 403},
		{name: "explicit open minus denyOut beyond the cap", op: closed, path: "/sandboxes",
			body: `{"templateID":"base","allow_internet_access":true,"network":{"denyOut":["10.0.0.0/8"]}}`, status: 403},
		{name: "explicit public ports the cap forbids", op: noPublic, domain: "sandlot.localhost", path: "/sandboxes",
			body: `{"templateID":"base","allow_internet_access":true,"network":{"allowPublicTraffic":true}}`, status: 403},
		{name: "no internet asked, default daemon", op: closed, path: "/sandboxes",
			body: `{"templateID":"base","allow_internet_access":false}`, status: 201, wantInfo: info{AllowInternetAccess: ptr(false)}},
		{name: "nothing asked, ports served: no network", op: closed, domain: "sandlot.localhost", path: "/v2/sandboxes",
			body: `{"templateID":"base"}`, status: 201, wantInfo: info{AllowInternetAccess: ptr(false)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := capEnv(t, c.op, c.domain)
			resp := e.Do("POST", c.path, strings.NewReader(c.body), "X-API-KEY", key1, "Content-Type", "application/json")
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("create: %d %s, want %d", resp.StatusCode, b, c.status)
			}
			if c.status != 201 {
				var ae apiErr
				if err := json.Unmarshal(b, &ae); err != nil || ae.Code != c.status || ae.Message == "" {
					t.Errorf("error body %s", b)
				}
				return
			}
			var sb created
			if err := json.Unmarshal(b, &sb); err != nil {
				t.Fatal(err)
			}
			rec, err := e.M.Get(context.Background(), "tenant-1", sb.SandboxID)
			if err != nil {
				t.Fatal(err)
			}
			// as JSON: a rule's address range has unexported fields
			want, _ := json.Marshal(c.want)
			gotNet, _ := json.Marshal(rec.Network)
			if string(want) != string(gotNet) {
				t.Errorf("the sandbox's network: %s, want %s", gotNet, want)
			}
			got := decode[info](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1))
			if diff := cmp.Diff(c.wantInfo, got); diff != "" {
				t.Errorf("getInfo (-want +got):\n%s", diff)
			}
		})
	}
}
