package contextstest

import (
	"context"
	"strings"

	"github.com/sandlot/sandlot/contexts"
)

// Guard is a fake contexts.Guard that replaces every occurrence of its
// secrets with "[REDACTED]", also across stream chunks.
type Guard struct {
	Secrets []string
	// Idle makes its streams IdleFlushers (FlushIdle releases what they
	// hold back), as the real guard's are.
	Idle bool
}

var _ contexts.Guard = (*Guard)(nil)

// Text implements contexts.Guard.
func (g *Guard) Text(ctx context.Context, tenantID, s string) string {
	for _, sec := range g.Secrets {
		s = strings.ReplaceAll(s, sec, "[REDACTED]")
	}
	return s
}

// Stream implements contexts.Guard.
func (g *Guard) Stream(ctx context.Context, tenantID string) contexts.StreamRedactor {
	hold := 0
	for _, s := range g.Secrets {
		hold = max(hold, len(s)-1)
	}
	if g.Idle {
		return &idleStream{stream{g: g, hold: hold}}
	}
	return &stream{g: g, hold: hold}
}

type idleStream struct{ stream }

// FlushIdle implements contexts.IdleFlusher.
func (s *idleStream) FlushIdle() string { return s.Flush() }

// File implements contexts.Guard: the file's bytes go through Stream,
// binary or not.
func (g *Guard) File(ctx context.Context, tenantID string) contexts.FileRedactor {
	return fileStream{g.Stream(ctx, tenantID)}
}

type fileStream struct{ st contexts.StreamRedactor }

func (f fileStream) Write(p []byte) []byte { return []byte(f.st.Write(string(p))) }

func (f fileStream) Flush() []byte { return []byte(f.st.Flush()) }

// Image implements contexts.Guard: an image holding a secret is dropped.
func (g *Guard) Image(ctx context.Context, tenantID, format string, data []byte) ([]byte, string) {
	for _, sec := range g.Secrets {
		if strings.Contains(string(data), sec) {
			return nil, "[REDACTED]"
		}
	}
	return data, ""
}

type stream struct {
	g    *Guard
	hold int
	buf  string
}

func (s *stream) Write(chunk string) string {
	s.buf = s.g.Text(context.Background(), "", s.buf+chunk)
	if len(s.buf) <= s.hold {
		return ""
	}
	n := len(s.buf) - s.hold
	out := s.buf[:n]
	s.buf = s.buf[n:]
	return out
}

func (s *stream) Flush() string {
	out := s.g.Text(context.Background(), "", s.buf)
	s.buf = ""
	return out
}
