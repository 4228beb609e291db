package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/e2bwire/filesystem/filesystemconnect"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Sandbox is one E2B sandbox, reached through envd and the code
// interpreter. It is safe for concurrent use.
type Sandbox struct {
	p         *Provider
	id, token string
	envdURL   string
	interpURL string
	envd      *http.Client
	interp    *http.Client
	proc      processconnect.ProcessClient
	fs        filesystemconnect.FilesystemClient

	mu         sync.Mutex
	ttl        time.Duration
	lastExtend time.Time
	kernels    map[string]*kernel // language/kernel name -> its E2B code context
	env        map[string]string  // SetEnv's variables, under each call's own
}

var _ contexts.Sandbox = (*Sandbox)(nil)

func (s *Sandbox) headers(port string) http.Header {
	h := http.Header{}
	h.Set(e2bwire.HeaderSandboxID, s.id)
	h.Set(e2bwire.HeaderSandboxPort, port)
	if s.token != "" {
		h.Set(e2bwire.HeaderAccessToken, s.token)
	}
	return h
}

// maxEnvdAnswer bounds one Connect message from envd (a listing of about
// 150 000 entries). envd runs inside the sandbox: its answers are bounded
// like any sandbox output, and compressed answers are not accepted, so
// none can inflate.
const maxEnvdAnswer = 32 << 20

func (s *Sandbox) initRPC() {
	opts := connect.WithClientOptions(connect.WithProtoJSON(), connect.WithReadMaxBytes(maxEnvdAnswer),
		connect.WithAcceptCompression("gzip", nil, nil))
	s.proc = processconnect.NewProcessClient(s.envd, s.envdURL, opts)
	s.fs = filesystemconnect.NewFilesystemClient(s.envd, s.envdURL, opts)
}

// ID implements contexts.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// Close implements contexts.Sandbox; the sandbox keeps running.
func (s *Sandbox) Close() error { return nil }

// touch extends the E2B timeout to the TTL from now, at most every
// ExtendEvery, in the background: an operation never waits for it.
func (s *Sandbox) touch() {
	s.mu.Lock()
	if s.ttl <= 0 || time.Since(s.lastExtend) < s.p.cfg.ExtendEvery {
		s.mu.Unlock()
		return
	}
	s.lastExtend = time.Now()
	ttl := s.ttl
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.p.cfg.ConnectTimeout)
		defer cancel()
		if err := s.p.setTimeout(ctx, s.id, ttl); err != nil {
			s.p.log.Warn("e2b extend timeout", logkey.Sandbox, s.id, logkey.Err, err)
		}
	}()
}

// SetTTL changes the timeout kept by touch and applies it now.
func (s *Sandbox) SetTTL(ctx context.Context, ttl time.Duration) error {
	s.mu.Lock()
	s.ttl, s.lastExtend = ttl, time.Now()
	s.mu.Unlock()
	return s.p.setTimeout(ctx, s.id, ttl)
}

// rpcError maps a Connect error to its errdefs category (same names).
func rpcError(op string, err error) error {
	if err == nil {
		return nil
	}
	code := connect.CodeOf(err)
	cat := errdefs.FromCode(errdefs.Code(code.String()))
	if code == connect.CodeUnknown || code == connect.CodeInternal || code == connect.CodeUnimplemented {
		cat = errdefs.ErrUnavailable
	}
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	return fmt.Errorf("e2b %s: %s: %w", op, msg, cat)
}

func (s *Sandbox) waitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = s.Ping(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("envd not healthy: %v: %w", last, errdefs.ErrUnavailable)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Ping implements contexts.Sandbox: envd's /health.
func (s *Sandbox) Ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.envdURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := s.envd.Do(req)
	if err != nil {
		return transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("envd health %d: %w", resp.StatusCode, errdefs.ErrUnavailable)
	}
	return nil
}

// SetEnv adds variables to every process and code run of the sandbox from
// now on (agent.SetEnvParams: a warm sandbox learning its context's
// identity). envd has no default environment to change after create, so
// they are held here and sent with each call, under the call's own; a
// daemon restart forgets them until the manager sets them again when it
// attaches the sandbox.
func (s *Sandbox) SetEnv(ctx context.Context, env map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.env == nil {
		s.env = map[string]string{}
	}
	maps.Copy(s.env, env)
	return nil
}

// callEnv is a call's environment: SetEnv's variables under the call's.
func (s *Sandbox) callEnv(env map[string]string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.env) == 0 {
		return env
	}
	out := maps.Clone(s.env)
	maps.Copy(out, env)
	return out
}
