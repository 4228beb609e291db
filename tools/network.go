package tools

import (
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/network/policy"
)

// NetworkPolicy turns the network of a tool request (api.ToolRequest,
// the MCP call's _meta) into the policy the manager enforces; nil stays
// nil. Malformed modes and rules are invalid_argument; the operator's caps
// are the manager's to check.
func NetworkPolicy(n *api.Network) (*policy.Policy, error) {
	if n == nil {
		return nil, nil
	}
	p := policy.Policy{Mode: policy.Mode(n.Mode).Normalize(), Secrets: n.Secrets,
		Ingress: policy.Ingress{Public: n.Ingress.Public, MaskRequestHost: n.Ingress.MaskRequestHost}}
	var err error
	if p.Allow, err = policy.ParseRules(n.Allow); err != nil {
		return nil, err
	}
	if p.Deny, err = policy.ParseRules(n.Deny); err != nil {
		return nil, err
	}
	for _, h := range n.Headers {
		p.Headers = append(p.Headers, policy.HeaderRule{Host: h.Host, Headers: h.Headers})
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}
