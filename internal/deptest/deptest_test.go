package deptest

import (
	"runtime"
	"testing"
)

// recorder is a TB that records failures.
type recorder struct{ failed bool }

func (r *recorder) Helper()               {}
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		p, pat string
		want   bool
	}{
		{"agent", "agent", true},
		{"agent/kernels", "agent", false},
		{"agent/kernels", "agent/...", true},
		{"agent", "agent/...", true},
		{"agentx", "agent/...", false},
		{"go.opentelemetry.io/otel/sdk/trace", "go.opentelemetry.io/otel/...", true},
	} {
		if got := match(tc.p, tc.pat); got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.p, tc.pat, got, tc.want)
		}
	}
}

// TestCheckFails runs a rule that must fail on a package that breaks it,
// so a deps test cannot pass by checking nothing.
func TestCheckFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check Check
	}{
		{"sandlot package outside the set", Check{Package: Module + "/tenant", Sandlot: []string{}}},
		{"forbidden import", Check{Package: Module + "/api/e2bcompat", Forbidden: map[string]string{"connectrpc.com/connect": "no Connect"}}},
		{"forbidden standard package", Check{Package: Module + "/api/e2bcompat", Forbidden: map[string]string{"net/http/...": "no HTTP"}}},
		{"over the outside budget", Check{Package: Module + "/tenant", MaxOutside: 1}},
		{"over the total budget", Check{Package: Module + "/errdefs", MaxAll: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{}
			done := make(chan struct{})
			go func() { // Fatalf ends this goroutine
				defer close(done)
				tc.check.Run(r)
			}()
			<-done
			if !r.failed {
				t.Errorf("the rule passed")
			}
		})
	}
}
