package contexts

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

// maskGuard masks the declared values its ctx carries, and nothing else:
// it shows which ctx the guarded sandbox hands the guard.
type maskGuard struct{}

func (maskGuard) mask(ctx context.Context, s string) string {
	for _, v := range MaskedValues(ctx) {
		s = strings.ReplaceAll(s, v, "[MASKED]")
	}
	return s
}
func (g maskGuard) Text(ctx context.Context, _, s string) string { return g.mask(ctx, s) }
func (g maskGuard) Stream(ctx context.Context, _ string) StreamRedactor {
	return &maskStream{ctx: ctx, g: g}
}
func (maskGuard) File(context.Context, string) FileRedactor { return nil }
func (maskGuard) Image(_ context.Context, _, _ string, data []byte) ([]byte, string) {
	return data, ""
}

type maskStream struct {
	ctx context.Context
	g   maskGuard
}

func (s *maskStream) Write(chunk string) string { return s.g.mask(s.ctx, chunk) }
func (s *maskStream) Flush() string             { return "" }

// attachSandbox is a sandbox whose detached command prints a secret.
type attachSandbox struct {
	Sandbox
	secret string
}

func (a attachSandbox) Attach(_ context.Context, p agent.AttachParams, out OutputFunc) (*agent.ExecResult, error) {
	out(agent.OutputEvent{Stream: "stdout", Data: "token=" + a.secret + "\n"})
	return &agent.ExecResult{Stdout: "token=" + a.secret + "\n"}, nil
}

// TestAttachMasksDeclaredSecrets: a command taken over after a restart
// (Attach) streams through the guard with the context's declared secrets,
// as Exec does, even when the caller's ctx carries none.
func TestAttachMasksDeclaredSecrets(t *testing.T) {
	const secret = "s3cr3t-declared-value"
	gs := &guardedSandbox{sb: attachSandbox{secret: secret}, g: maskGuard{}, tenant: "t", masked: []string{secret}}
	var streamed strings.Builder
	res, err := gs.Attach(context.Background(), agent.AttachParams{PID: 7}, func(ev agent.OutputEvent) { streamed.WriteString(ev.Data) })
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"streamed": streamed.String(), "result": res.Stdout} {
		if strings.Contains(s, secret) || !strings.Contains(s, "[MASKED]") {
			t.Errorf("%s output %q: want the declared secret masked", what, s)
		}
	}
}
