package stack

import (
	"context"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/policy"
)

// BenchmarkCreate is a sandbox's cold create (crun, agent answering)
// without a network and with one (allowlist, spares kept), so the
// difference is what a network adds. Deletion is outside the timer.
func BenchmarkCreate(b *testing.B) {
	e := newEnv(b, 4)
	p := newProvider(b, "crun", e.st)
	allow := &policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")}
	for _, c := range []struct {
		name string
		pol  *policy.Policy
	}{{"none", nil}, {"network", allow}, {"none-again", nil}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				sb, err := p.Create(cctx, contexts.Spec{Network: c.pol, Labels: map[string]string{contexts.LabelTenant: "t1"}})
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				sb.Close()
				if err := p.Destroy(ctx, sb.ID()); err != nil {
					b.Fatal(err)
				}
				// Let the spare filler rebuild, as between real creates.
				time.Sleep(20 * time.Millisecond)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSetup is the stack's part of a network create with spares:
// rules, record, proxy registration.
func BenchmarkSetup(b *testing.B) {
	e := newEnv(b, 4)
	ctx := context.Background()
	pol := policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")}
	i := 0
	for b.Loop() {
		i++
		id := "bench-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000000")
		if _, _, err := e.st.Setup(ctx, id, "t1", "", pol); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := e.st.Teardown(ctx, id); err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		b.StartTimer()
	}
}
