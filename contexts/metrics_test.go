package contexts_test

import (
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/telemetry"
)

// The telemetry package's instruments plug into the manager as they are.
var _ contexts.Metrics = (*telemetry.Metrics)(nil)
