package contexts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/telemetry"
)

// rotationDue reports whether rec has used up its executions and must rotate.
func (m *Manager) rotationDue(rec *Record) bool {
	max := m.maxExecutions(rec)
	return max > 0 && rec.ExecutionCount >= max
}

// maxExecutions is rec's rotation limit; <= 0 never rotates.
func (m *Manager) maxExecutions(rec *Record) int64 {
	if rec.MaxExecutions != 0 {
		return rec.MaxExecutions
	}
	return m.cfg.MaxExecutionsPerContext
}

// ExecuteRequest is one Execute call.
type ExecuteRequest struct {
	Language string            // python | javascript | typescript | bash | sh
	Code     string            // at most Config.MaxCodeBytes
	Timeout  time.Duration     // 0 = Config.DefaultTimeout; MinTimeout..MaxTimeout, else invalid_argument
	Kernel   string            // named kernel (E2B code contexts); "" = default
	User     string            // who the kernel runs as (agent.RootUser); "" = the sandbox user
	Env      map[string]string // for this run only (restored after it)
	// IPython runs a python cell through IPython (agent
	// RunCodeParams.IPython); other languages ignore it.
	IPython bool
	// Unbounded runs with no timeout (Timeout must be 0): only ctx ends
	// the run. For edges whose clients time out themselves and hang up,
	// as E2B's runCode does.
	Unbounded bool
	// ContextID, when set, runs only in that context (see
	// CreateOptions.ContextID): never in a fresh one.
	ContextID string
	// Template is the template of the context when this call creates it
	// ("" the default). When the context exists on another template the
	// call fails with failed_precondition: a context keeps its sandbox's
	// template for its life (end it to start over on another).
	Template string
	// CodeLimit, when larger than Config.MaxCodeBytes, bounds Code
	// instead: an edge whose wire promises larger cells and bounds its
	// bodies itself (E2B's /execute). At most MaxCodeLimit.
	CodeLimit int
	// Network is the network the context should have
	// (CreateOptions.Network): it shapes a context this call creates, and
	// an existing one's differing policy is replaced (ensureNetwork).
	Network *policy.Policy
}

// bootKernel is the kernel a sandbox created by req's call starts at boot
// (CreateOptions.Prestart): the default kernel of req's language, which the
// call starts next anyway; none for a named kernel, another user's or sh.
func bootKernel(req ExecuteRequest) []string {
	if req.Kernel != "" || req.User != "" {
		return nil
	}
	switch req.Language {
	case agent.Python:
		if req.IPython {
			return []string{agent.PrestartIPython}
		}
		return []string{agent.Python}
	case agent.JavaScript, agent.TypeScript, agent.Bash:
		return []string{req.Language}
	}
	return nil
}

// MaxCodeLimit is the largest ExecuteRequest.CodeLimit: the code travels
// to the agent in one frame, JSON-escaped.
const MaxCodeLimit = agent.MaxFrame / 8

// ExecuteResult is a guarded run result and where it ran.
type ExecuteResult struct {
	agent.RunCodeResult // guarded
	ContextID           string
	SandboxID           string
	Identity            Identity
	// Rotated is set on the call that used up the context's executions
	// (MaxExecutionsPerContext): the context ended after it (reason
	// rotated), so the next call starts in a fresh sandbox without this
	// one's variables and files. Callers are told rather than left to
	// meet a NameError.
	Rotated bool
	// StateLost is set when this call ran in a fresh context that
	// replaced one whose sandbox was lost (found dead before this call's
	// code started: a failed health check or attach, a request that could
	// not be sent, a loss at reconcile): the variables, files and
	// installed packages of the earlier calls are gone. The call itself
	// ran once, in the fresh sandbox. A sandbox lost while a call runs
	// fails that call instead (a Failure with StateLost), never re-running
	// code that may have had effects (docs/contexts.md).
	StateLost bool
	// Woken is set on the first call after the context woke from
	// suspension to disk (Manager.Suspend): its files are as they were,
	// its kernels started fresh, so the variables, imports and processes
	// of earlier calls are gone.
	Woken bool
	// Restored is set on the first call after the context woke from
	// suspension with its memory (a provider with CapMemory: runsc): its
	// kernels, variables and processes are as they were, nothing was
	// lost. Woken is then false.
	Restored bool
}

// Languages accepted by Execute.
var languages = map[string]bool{
	agent.Python: true, agent.JavaScript: true, agent.TypeScript: true, agent.Bash: true, agent.Sh: true,
	agent.R: true, agent.Java: true,
}

// validate checks req and returns its effective timeout.
func (m *Manager) validate(req ExecuteRequest) (time.Duration, error) {
	if !languages[req.Language] {
		return 0, fmt.Errorf("language %q is not supported (use python, javascript, typescript, bash, sh, r or java): %w",
			req.Language, errdefs.ErrInvalidArgument)
	}
	limit := m.cfg.MaxCodeBytes
	if req.CodeLimit > limit {
		limit = min(req.CodeLimit, MaxCodeLimit)
	}
	if len(req.Code) > limit {
		return 0, fmt.Errorf("code is %d bytes (limit %d): %w", len(req.Code), limit, errdefs.ErrInvalidArgument)
	}
	t := req.Timeout
	if req.Unbounded {
		if t != 0 {
			return 0, fmt.Errorf("an unbounded run takes no timeout: %w", errdefs.ErrInvalidArgument)
		}
		return 0, nil
	}
	if t == 0 {
		t = m.cfg.DefaultTimeout
	}
	if t < m.cfg.MinTimeout || t > m.cfg.MaxTimeout {
		return 0, fmt.Errorf("timeout %s is outside %s..%s: %w", t, m.cfg.MinTimeout, m.cfg.MaxTimeout, errdefs.ErrInvalidArgument)
	}
	return t, nil
}

// timeoutGrace is how long past the run's own timeout the manager waits
// for the agent to answer before it reports a timeout itself.
const timeoutGrace = 15 * time.Second

// Execute runs code in the context's persistent kernel. Calls on one
// context are serialized; different contexts run in parallel. out receives
// guarded streamed output (may be nil). A timeout is a result (TimedOut),
// not an error, and the context stays ready.
//
// Rotation: the call that brings a context's execution count to
// MaxExecutionsPerContext is answered normally, then the context is
// terminated with reason rotated; the next call gets a fresh sandbox.
func (m *Manager) Execute(ctx context.Context, id Identity, req ExecuteRequest, out OutputFunc) (*ExecuteResult, error) {
	ctx, span := startSpan(ctx, spanExecute, id, telemetry.AttrLanguage.String(req.Language))
	res, err := m.execute(ctx, id, req, out)
	if res != nil && span.IsRecording() {
		span.SetAttributes(telemetry.AttrSandbox.String(res.SandboxID))
		if res.TimedOut {
			span.SetAttributes(attrTimedOut)
		}
	}
	endSpan(span, err)
	return res, err
}

func (m *Manager) execute(ctx context.Context, id Identity, req ExecuteRequest, out OutputFunc) (*ExecuteResult, error) {
	timeout, err := m.validate(req)
	if err != nil {
		return nil, err
	}
	resent := false
	// The call's request carries the health check (agent.WithProbe) where
	// it can: the reuse's ping before it was a third of a warm call.
	ctx = m.withProbing(ctx)
	for range 4 {
		within := timeout + timeoutGrace
		if req.Unbounded {
			within = 0 // no bound to keep the record for: touch it
		}
		e, err := m.acquire(ctx, id, CreateOptions{ContextID: req.ContextID, Network: req.Network, Template: req.Template, Prestart: bootKernel(req),
			Language: req.Language}, within)
		if err != nil {
			if errors.Is(err, errdefs.ErrUnavailable) && !errors.As(err, new(ownedError)) {
				m.countExecution(req.Language, OutcomeFault, 0) // a call for another node's context is no fault
			}
			return nil, err
		}
		if err := e.exec.lock(ctx); err != nil {
			return nil, err
		}
		m.mu.Lock()
		ended, sb := e.ended, e.sb
		m.mu.Unlock()
		if ended || sb == nil { // rotated or ended while we waited
			e.exec.unlock()
			continue
		}
		mctx, err := m.mask(ctx, e)
		if err != nil {
			e.exec.unlock()
			return nil, err
		}
		res, err := m.run(mctx, e, sb, req, timeout, out, !resent)
		e.exec.unlock()
		if errors.Is(err, errResend) {
			resent = true
			continue // the sandbox died before the request left: run it in a fresh one
		}
		return res, err
	}
	return nil, &Failure{Kind: FailureLost, Err: fmt.Errorf("context of %s/%s kept ending under this call: %w", id.ConversationID, id.PathID, errdefs.ErrUnavailable)}
}

// errResend is run's answer when the call never reached a sandbox that
// turned out dead (agent.ErrNotSent, then a failed ping): the context is
// ended and the call may go to a fresh one, as if the health check before
// it had failed.
var errResend = errors.New("request not sent to a dead sandbox")

// run executes one call on e. Precondition: e's exec lock is held.
// mayResend allows errResend.
func (m *Manager) run(ctx context.Context, e *entry, sb Sandbox, req ExecuteRequest, timeout time.Duration, out OutputFunc, mayResend bool) (*ExecuteResult, error) {
	rec := m.snapshot(e)
	if err := m.checkTemplate(ctx, rec, req.Template); err != nil {
		return nil, err
	}
	if err := m.checkLanguage(ctx, rec.Template, req.Language); err != nil {
		return nil, err
	}
	g := m.cfg.Guard
	sg := newStreamGuard(ctx, g, rec.TenantID, out)
	p := agent.RunCodeParams{
		Language:  req.Language,
		Code:      req.Code,
		Kernel:    req.Kernel,
		User:      req.User,
		Env:       req.Env,
		IPython:   req.IPython,
		TimeoutMs: timeout.Milliseconds(),
		Stream:    out != nil,
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+timeoutGrace)
	if req.Unbounded {
		p.TimeoutMs = -1
		cancel()
		cctx, cancel = context.WithCancel(ctx)
	}
	if probesInBand(ctx, sb) {
		cctx = agent.WithProbe(cctx)
	}
	start := time.Now()
	res, err := sb.RunCode(cctx, p, sg.fn())
	cancel()
	sg.flush()
	wall := time.Since(start)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("execute in context %s: %w", rec.ID, ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			// The agent did not answer within the timeout and its grace:
			// report a timeout; the next call's health check decides
			// whether the sandbox survives.
			res = &agent.RunCodeResult{
				TimedOut:   true,
				Error:      &agent.ExecError{Name: "TimeoutError", Value: fmt.Sprintf("execution exceeded %s", timeout)},
				DurationMs: wall.Milliseconds(),
			}
		case errdefs.Categorized(err) && !errors.Is(err, errdefs.ErrUnavailable):
			// The request was refused (bad kernel name, ...): the sandbox is fine.
			m.markAlive(e)
			m.countExecution(req.Language, OutcomeError, wall)
			return nil, guardError(ctx, g, rec.TenantID, err)
		default:
			// A transport failure (the agent client reports them as
			// unavailable): the sandbox may be gone.
			pctx, pcancel := context.WithTimeout(ctx, m.cfg.HealthCheckTimeout)
			perr := sb.Ping(pctx)
			pcancel()
			if perr != nil && !m.sandboxGone(ctx, e, sb) {
				perr = nil // this node's connection failed; the sandbox is there
			}
			if perr != nil {
				if mayResend && errors.Is(err, agent.ErrNotSent) && !m.isClosed() {
					// Provably never reached the agent: nothing ran, so
					// this is the failed health check of a reuse.
					m.healthFailed(ctx, e, "health check failed: "+err.Error(), false)
					return nil, errResend
				}
				m.healthFailed(ctx, e, "sandbox lost during execution: "+err.Error(), true)
			}
			m.countExecution(req.Language, OutcomeFault, wall)
			err = guardError(ctx, g, rec.TenantID, err)
			if !errors.Is(err, errdefs.ErrUnavailable) {
				err = fmt.Errorf("%w: %w", err, errdefs.ErrUnavailable)
			}
			if perr == nil {
				// The sandbox answers: the connection failed, not the
				// sandbox, and the context (its state) is kept.
				return nil, &Failure{Kind: FailureLost, Err: fmt.Errorf("execute in context %s: the call failed in transit; the sandbox still answers: %w", rec.ID, err)}
			}
			return nil, &Failure{Kind: FailureLost, StateLost: true,
				Err: fmt.Errorf("execute in context %s: the sandbox failed, the next call gets a fresh one: %w", rec.ID, err)}
		}
	}
	if err == nil {
		m.markAlive(e) // the agent answered
	}
	dur := wall
	if res.DurationMs > 0 {
		dur = time.Duration(res.DurationMs) * time.Millisecond
	}
	m.recordExecution(ctx, e, dur)
	if m.shared {
		// Every node serves the context and reads its record before a
		// call: the next call, on any node, sees this one counted.
		m.settle(context.WithoutCancel(ctx), e)
	}
	m.countExecution(req.Language, outcome(res), dur)

	m.mu.Lock()
	rotated := !e.ended && m.rotationDue(e.rec)
	m.mu.Unlock()
	if rotated {
		m.end(ctx, e, ReasonRotated, "")
	}
	return &ExecuteResult{
		RunCodeResult: *guardRunResult(ctx, g, rec.TenantID, res),
		ContextID:     rec.ID,
		SandboxID:     sb.ID(),
		Identity:      rec.Identity,
		Rotated:       rotated,
		StateLost:     m.takeReplaced(e),
		Woken:         m.takeWoken(e),
		Restored:      m.takeRestored(e),
	}, nil
}

func outcome(r *agent.RunCodeResult) string {
	switch {
	case r.TimedOut:
		return OutcomeTimeout
	case !r.Success || r.Error != nil:
		return OutcomeError
	}
	return OutcomeOK
}

// Use runs fn with the context's sandbox (GetOrCreate + health check + TTL
// touch). The sandbox passed to fn is guarded: everything it returns has
// passed the egress guard. Use does not serialize with Execute; the agent
// handles concurrent calls. fn must not keep sb after it returns, and
// sb.Close is a no-op.
//
// Inside fn, StateLost(ctx) says whether the context replaced one whose
// sandbox was lost. When fn fails with unavailable and the sandbox no
// longer answers a ping, the sandbox died under the call: the context is
// ended (a failed health check) and the error is a Failure (FailureLost,
// StateLost) that still matches the original with errors.Is. A ctx made
// with ProbeInCall moves the health check into fn's calls.
func (m *Manager) Use(ctx context.Context, id Identity, opts CreateOptions, fn func(ctx context.Context, rec *Record, sb Sandbox) error) error {
	inCall := probeInCall(ctx, opts)
	if inCall {
		ctx = m.withProbing(ctx)
	}
	e, err := m.acquire(ctx, id, opts, 0)
	if err != nil {
		return err
	}
	m.mu.Lock()
	rec, sb := cloneRecord(e.rec), e.sb
	e.users++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		e.users--
		m.mu.Unlock()
		m.writeUse(ctx, e) // its touch, kept in memory for the call
	}()
	if sb == nil {
		return fmt.Errorf("context %s ended while starting: %w", rec.ID, errdefs.ErrUnavailable)
	}
	ctx, err = m.mask(ctx, e)
	if err != nil {
		return err
	}
	gs := GuardSandbox(sb, m.cfg.Guard, rec.TenantID)
	if g, ok := gs.(*guardedSandbox); ok {
		g.masked = MaskedValues(ctx)
	}
	fctx := m.withWoken(m.withStateLost(ctx, e), e)
	if inCall && probesInBand(ctx, sb) {
		// A request the probe shows never dispatched fails with
		// agent.ErrNotSent (unavailable): diedUnder below ends the
		// context, as the ping before fn would have.
		fctx = agent.WithProbe(fctx)
	}
	err = fn(fctx, rec, gs)
	if err != nil && errors.Is(err, errdefs.ErrUnavailable) && ctx.Err() == nil {
		if _, ok := AsFailure(err); !ok && m.diedUnder(ctx, e, sb) {
			return &Failure{Kind: FailureLost, StateLost: true, Err: err}
		}
	}
	return err
}

// diedUnder reports whether sb, whose call just failed with unavailable,
// is gone (its ping fails); it then ends e as a failed health check. The
// call that met the death reports it, so the next context is not marked.
func (m *Manager) diedUnder(ctx context.Context, e *entry, sb Sandbox) bool {
	pctx, cancel := context.WithTimeout(ctx, m.cfg.HealthCheckTimeout)
	perr := sb.Ping(pctx)
	cancel()
	if perr == nil || ctx.Err() != nil || !m.sandboxGone(ctx, e, sb) {
		return false
	}
	m.healthFailed(ctx, e, "sandbox lost during a call: "+perr.Error(), true)
	return true
}

// sandboxGone decides whether sb's sandbox, which just failed to answer a
// ping, is gone. A sandbox of a provider that is not shared is. A shared
// provider's sandbox is reached by every node, so this node's connection
// failing says little: the connection is dropped (the next call attaches
// again), and the sandbox is gone only when the provider says so (an
// attach answers not_found).
func (m *Manager) sandboxGone(ctx context.Context, e *entry, sb Sandbox) bool {
	m.mu.Lock()
	moved := e.rec.SandboxID != sb.ID() || e.rec.Suspended() || connMoved(e, sb)
	m.mu.Unlock()
	if moved {
		// Suspended under the call (its sandbox destroyed on purpose),
		// woken since on another, or checkpointed (its agent let go of
		// the channel, checkpointing.go): not a loss.
		return false
	}
	if !m.shared {
		return true
	}
	m.mu.Lock()
	id := e.rec.SandboxID
	m.mu.Unlock()
	m.detach(e, sb)
	return m.attachLost(ctx, id)
}

// checkLanguage refuses a run in a language the context's template does
// not offer (Config.Catalog). A template deleted since the context was
// made no longer says: the run goes to the sandbox, which has what it has.
func (m *Manager) checkLanguage(ctx context.Context, template, language string) error {
	if m.cfg.Catalog == nil {
		return nil
	}
	info, err := m.cfg.Catalog.TemplateInfo(ctx, template)
	if err != nil || len(info.Languages) == 0 || slices.Contains(info.Languages, language) {
		return nil
	}
	hint := "use one of those, or a template that has " + language
	if language == agent.R || language == agent.Java {
		hint += " (the built-in code-interpreter template has R and Java)"
	}
	return languageRefused{fmt.Errorf("template %q has no %s kernel (it offers %s); %s: %w", info.Name, language, strings.Join(info.Languages, ", "), hint, errdefs.ErrInvalidArgument)}
}

// ErrLanguageNotOffered marks a run refused because its context's template
// offers no kernel for its language (an invalid_argument too), so an edge
// can answer it in its own protocol's shape (E2B: NotSupportedError).
var ErrLanguageNotOffered = errors.New("language not offered by the template")

type languageRefused struct{ error }

func (e languageRefused) Unwrap() error        { return e.error }
func (e languageRefused) Is(target error) bool { return target == ErrLanguageNotOffered }

// checkTemplate refuses a call that asks for template ref ("" asks for
// nothing) in a context that runs on another one.
func (m *Manager) checkTemplate(ctx context.Context, rec *Record, ref string) error {
	if ref == "" {
		return nil
	}
	want := ref
	if m.cfg.Catalog != nil {
		var err error
		if want, err = m.resolveTemplate(ctx, rec.TenantID, ref); err != nil {
			return err
		}
	}
	if want == rec.Template {
		return nil
	}
	have := rec.Template
	if m.cfg.Catalog != nil {
		if info, err := m.cfg.Catalog.TemplateInfo(ctx, rec.Template); err == nil {
			have = info.Name
		}
	}
	return fmt.Errorf("context %s/%s runs on template %q, not %q; a context keeps its template (end it, or use another path, to run on %q): %w",
		rec.ConversationID, rec.PathID, have, ref, ref, errdefs.ErrFailedPrecondition)
}
