package contexts

import "github.com/sandlot/sandlot/agent"

// The agent client is the local provider's Sandbox.
var _ Sandbox = (*agent.Client)(nil)
