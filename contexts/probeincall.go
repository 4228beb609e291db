package contexts

import "context"

// probeInCallKey marks a Use whose callback carries the reuse's health
// check in band (ProbeInCall).
type probeInCallKey struct{}

// ProbeInCall marks ctx for a Use whose callback calls its sandbox at
// once (the E2B surface's process start): on a provider that is not
// shared, the reuse's ping before the callback is skipped and each call
// the callback makes sends it in the same write as its request instead
// (agent.WithProbe), as a warm Execute does. The ping's round trip was
// as long as the call it guarded.
//
// It takes effect only for a Use naming its context
// (CreateOptions.ContextID), which never moves to a fresh sandbox: a
// sandbox found dead by the probe fails the call with unavailable and
// ends the context (a Failure of kind FailureLost), where a failed ping
// before it ended the context and failed the call the same way. A Use
// without ContextID keeps the ping, which lets it run its callback in a
// fresh context transparently.
func ProbeInCall(ctx context.Context) context.Context {
	return context.WithValue(ctx, probeInCallKey{}, true)
}

// probeInCall reports whether a Use with opts may probe in band (see
// ProbeInCall).
func probeInCall(ctx context.Context, opts CreateOptions) bool {
	v, _ := ctx.Value(probeInCallKey{}).(bool)
	return v && opts.ContextID != ""
}
