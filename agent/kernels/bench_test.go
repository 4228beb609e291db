package kernels

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

// BenchmarkRun measures a warm run without the socket hop.
func BenchmarkRun(b *testing.B) {
	m := New(Config{Home: b.TempDir()})
	defer m.Close()
	for _, tc := range []struct{ lang, code string }{{agent.Python, "1+1"}, {agent.JavaScript, "1+1"}, {agent.Bash, "echo 2"}} {
		b.Run(tc.lang, func(b *testing.B) {
			ctx := context.Background()
			p := agent.RunCodeParams{Language: tc.lang, Code: tc.code}
			for i := 0; i < 20; i++ {
				if _, err := m.Run(ctx, p, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := m.Run(ctx, p, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
