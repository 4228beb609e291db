package agent

import (
	"context"
	"fmt"
)

// The typed calls of the protocol, one per agent method; the framing,
// dispatch and connection handling are in client.go.

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error {
	var r PingResult
	return c.call(ctx, MethodPing, Empty{}, &r, nil, 0)
}

// PingInfo is Ping with the agent's answer.
func (c *Client) PingInfo(ctx context.Context) (*PingResult, error) {
	var r PingResult
	if err := c.call(ctx, MethodPing, Empty{}, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// RunCode runs code in a persistent kernel. out (may be nil) receives
// output notifications when p.Stream is set.
func (c *Client) RunCode(ctx context.Context, p RunCodeParams, out func(OutputEvent)) (*RunCodeResult, error) {
	var r RunCodeResult
	if err := c.call(ctx, MethodRunCode, p, &r, out, p.MaxOutput); err != nil {
		return nil, err
	}
	return &r, nil
}

// RestartKernel kills a kernel; the next RunCode starts a fresh one.
func (c *Client) RestartKernel(ctx context.Context, p KernelParams) error {
	return c.call(ctx, MethodKernelRestart, p, nil, nil, 0)
}

// Release asks the agent to close its channel after it answers
// (MethodRelease): this connection ends, and the next one is to a new
// listener. It returns once the agent has let go, not at its answer: the
// agent closes its listener after it has written the answer, and only
// then its connections, so this one's end is the sign that no listener
// is left (a checkpoint taken between the two fails on the bound socket,
// which a loaded machine made happen). Until then ctx bounds the wait.
func (c *Client) Release(ctx context.Context) error { return c.ReleaseWith(ctx, ReleaseParams{}) }

// ReleaseWith is Release with its parameters.
func (c *Client) ReleaseWith(ctx context.Context, p ReleaseParams) error {
	if err := c.call(ctx, MethodRelease, p, nil, nil, 0); err != nil {
		return err
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sandbox %s: %s: answered, but the connection did not end: %w", c.id, MethodRelease, ctx.Err())
	}
}

// Rekey gives the agent a new key (MethodRekey): connections after it
// must prove key. The agent refuses it on a session that is not sealed.
func (c *Client) Rekey(ctx context.Context, key []byte) error {
	return c.call(ctx, MethodRekey, RekeyParams{Key: key}, nil, nil, 0)
}

// SetEnv adds variables to the sandbox's environment for the execs and
// kernel runs that follow (SetEnvParams).
func (c *Client) SetEnv(ctx context.Context, env map[string]string) error {
	return c.call(ctx, MethodSetEnv, SetEnvParams{Env: env}, nil, nil, 0)
}

// Exec runs a process. out (may be nil) receives output notifications when
// p.Stream is set.
func (c *Client) Exec(ctx context.Context, p ExecParams, out func(OutputEvent)) (*ExecResult, error) {
	var r ExecResult
	if err := c.call(ctx, MethodExec, p, &r, out, p.MaxOutput); err != nil {
		return nil, err
	}
	return &r, nil
}

// Attach takes over a detached exec (ExecParams.Detach) after its
// connection dropped: its output streams to out (a Start event first) and
// its result ends the call.
func (c *Client) Attach(ctx context.Context, p AttachParams, out func(OutputEvent)) (*ExecResult, error) {
	var r ExecResult
	if err := c.call(ctx, MethodAttach, p, &r, out, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// Signal signals a running exec's process group.
func (c *Client) Signal(ctx context.Context, p SignalParams) error {
	return c.call(ctx, MethodSignal, p, nil, nil, 0)
}

// Stdin writes to (or closes) a running exec's stdin.
func (c *Client) Stdin(ctx context.Context, p StdinParams) error {
	return c.call(ctx, MethodStdin, p, nil, nil, 0)
}

// Processes lists running execs.
func (c *Client) Processes(ctx context.Context) ([]Process, error) {
	var r ProcessList
	if err := c.call(ctx, MethodProcesses, Empty{}, &r, nil, 0); err != nil {
		return nil, err
	}
	return r.Processes, nil
}

// ReadFile reads one chunk of a file.
func (c *Client) ReadFile(ctx context.Context, p ReadParams) (*ReadResult, error) {
	p.User = userOf(ctx, p.User)
	var r ReadResult
	if err := c.call(ctx, MethodReadFile, p, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// WriteFile writes one chunk of a file.
func (c *Client) WriteFile(ctx context.Context, p WriteParams) (*FileInfo, error) {
	p.User = userOf(ctx, p.User)
	var r FileInfo
	if err := c.call(ctx, MethodWriteFile, p, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// EditFile replaces an exact string in a file.
func (c *Client) EditFile(ctx context.Context, p EditParams) (*EditResult, error) {
	p.User = userOf(ctx, p.User)
	var r EditResult
	if err := c.call(ctx, MethodEditFile, p, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// List lists a directory.
func (c *Client) List(ctx context.Context, p ListParams) ([]FileInfo, error) {
	p.User = userOf(ctx, p.User)
	var r ListResult
	if err := c.call(ctx, MethodList, p, &r, nil, 0); err != nil {
		return nil, err
	}
	return r.Entries, nil
}

// Stat describes one path.
func (c *Client) Stat(ctx context.Context, path string) (*FileInfo, error) {
	var r FileInfo
	if err := c.call(ctx, MethodStat, PathParams{Path: path, User: userOf(ctx, "")}, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// Mkdir creates a directory and its parents.
func (c *Client) Mkdir(ctx context.Context, path string) (*FileInfo, error) {
	var r FileInfo
	if err := c.call(ctx, MethodMkdir, PathParams{Path: path, User: userOf(ctx, "")}, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// Remove removes a path.
func (c *Client) Remove(ctx context.Context, p RemoveParams) error {
	p.User = userOf(ctx, p.User)
	return c.call(ctx, MethodRemove, p, nil, nil, 0)
}

// Move renames a path.
func (c *Client) Move(ctx context.Context, p MoveParams) (*FileInfo, error) {
	p.User = userOf(ctx, p.User)
	var r FileInfo
	if err := c.call(ctx, MethodMove, p, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// Glob matches paths.
func (c *Client) Glob(ctx context.Context, p GlobParams) (*GlobResult, error) {
	p.User = userOf(ctx, p.User)
	var r GlobResult
	if err := c.call(ctx, MethodGlob, p, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

// Grep searches files.
func (c *Client) Grep(ctx context.Context, p GrepParams) (*GrepResult, error) {
	p.User = userOf(ctx, p.User)
	var r GrepResult
	if err := c.call(ctx, MethodGrep, p, &r, nil, 0); err != nil {
		return nil, err
	}
	return &r, nil
}

type userKey struct{}

// WithUser returns a context whose file calls (ReadFile, WriteFile, Stat,
// ...) run as user (DefaultUser or RootUser) unless their params name one.
// It is a property of the request, like its deadline: an edge that takes a
// user (the E2B envd wire) sets it once for everything its call does.
func WithUser(ctx context.Context, user string) context.Context {
	if (user == "" || user == DefaultUser) && ctx.Value(userKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, userKey{}, user)
}

// UserOf returns the user WithUser set ("" when none).
func UserOf(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

func userOf(ctx context.Context, set string) string {
	if set != "" {
		return set
	}
	return UserOf(ctx)
}
