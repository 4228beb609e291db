// Package guard is the egress guard: it finds personal data and secrets in
// text that leaves a sandbox and reports or redacts them.
//
// Detection runs hand-written scanners, one cheap pass per trigger (digits,
// '@', "://", '=' and ':', word prefixes, base64 runs, PEM headers), and only
// calls the expensive validators (checksums, libphonenumber, public
// suffixes, netip) around candidates. People, addresses, organisations,
// places and dates of birth are judged instead (entity.go): rules read a
// candidate's context, and a model (Config.Model, guard/ner) decides what
// they leave open. Matching runs on the NFKC form of the
// text; findings are mapped back to byte offsets in the original text, so
// redaction leaves everything else untouched. docs/guard.md lists the rules.
package guard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nyaruka/phonenumbers"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/tenant"
)

// Modes.
const (
	ModeOff     = "off"     // pass everything through
	ModeReport  = "report"  // pass through, audit findings
	ModeEnforce = "enforce" // replace findings with [REDACTED:<TYPE>]
)

// Finding types.
const (
	TypeEmail          = "EMAIL"
	TypePhone          = "PHONE"
	TypeSSN            = "SSN"
	TypePPSN           = "PPSN"
	TypeCreditCard     = "CREDIT_CARD"
	TypeIBAN           = "IBAN"
	TypeIPAddress      = "IP_ADDRESS"
	TypeAPIKey         = "API_KEY"
	TypeGitHubToken    = "GITHUB_TOKEN"
	TypeJWT            = "JWT"
	TypeAWSAccessKey   = "AWS_ACCESS_KEY"
	TypeAWSSecretKey   = "AWS_SECRET_KEY"
	TypeDatabaseURL    = "DATABASE_URL"
	TypeURLCredentials = "URL_CREDENTIALS"
	TypePassword       = "PASSWORD"
	TypePrivateKey     = "PRIVATE_KEY"
)

// Finding is one detected value. Start and End are byte offsets into the
// text as given (not its NFKC form); the value is never kept.
type Finding struct {
	Type       string  `json:"type"`
	Start      int     `json:"start"`
	End        int     `json:"end"`
	Confidence float64 `json:"confidence"`
}

// Event is what Audit receives for each finding: never the value, only an
// HMAC-SHA256 of it under Config.HMACKey, so equal values can be correlated.
type Event struct {
	TenantID string
	Mode     string
	Task     string // the task type of the output (contexts.TaskTypeOf), "" unnamed
	Type     string
	Start    int // byte offset in the text, or in the whole stream for Stream
	End      int
	HMAC     string // hex
}

// Config configures a Guard. The zero value is usable.
type Config struct {
	// Mode is the default mode; "" means enforce.
	Mode string
	// Regions are the default regions for phone numbers written without a
	// country code; nil means IE and US.
	Regions []string
	// ModeFor returns a tenant's mode ("" or nil: Mode) when ctx does not
	// carry the tenant itself: a request's context does (tenant.With), and
	// its GuardMode applies without a call here; ModeFor serves work
	// outside a request (cleanup, a store's view of the tenant). An
	// unknown mode is treated as enforce.
	ModeFor func(ctx context.Context, tenantID string) string
	// Audit, if set, receives one event per finding in report and enforce
	// mode. It must not block for long.
	Audit func(ctx context.Context, ev Event)
	// HMACKey keys the audit HMACs; nil means a random key per Guard, so
	// HMACs only correlate within one daemon run.
	HMACKey []byte
	// Meter makes the findings counter (sandlot.guard.findings, by type).
	// Nil: telemetry.Meter(), the global provider's.
	Meter metric.Meter
	// Known returns the values of a tenant's stored secrets (the network's
	// secrets, docs/network.md): they are masked in all of the tenant's
	// output with their encodings, like declared values (TypeSecret).
	// Results are cached for 5 s per tenant; Forget drops a tenant's.
	// Nil: no stored values.
	Known func(ctx context.Context, tenantID string) ([]string, error)
	// TaskModes gives a task type (contexts.TaskSandboxExecution,
	// TaskTemplateBuild; the call's context names it) the least strict
	// mode its output gets: the mode that applies is the stricter of the
	// tenant's (or a request's override) and its task type's, so the
	// operator can hold a kind of output to report or enforce whatever a
	// tenant chose. nil: the tenant's mode alone. An unknown mode is
	// invalid_argument.
	TaskModes map[string]string
	// Entities are the entity types (EntityTypes) every tenant's output is
	// scanned for unless it chose others; nil means all, empty none. An
	// unknown type is invalid_argument.
	Entities []string
	// EntitiesFor returns a tenant's entity types when ctx does not carry
	// the tenant (tenant.With carries its GuardEntities); nil, or a nil
	// result, means Entities.
	EntitiesFor func(ctx context.Context, tenantID string) []string
	// Model judges the candidates the entity rules leave open (guard/ner).
	// Nil: the rules alone (addresses, dates of birth, names after a cue
	// or a given name, organisations by their legal word); ModelError says
	// why, for ModelStatus.
	Model      Recognizer
	ModelError error
	// ModelBudget is the time the model may take in each second, across
	// every stream of the process; past it the rules judge alone until the
	// next second (ModelSkipped counts those windows). 0:
	// DefaultModelBudget; negative: no bound.
	ModelBudget time.Duration
}

// Guard finds and redacts. It is safe for concurrent use.
type Guard struct {
	mode     string
	tasks    map[string]string
	regions  []string
	modeFor  func(ctx context.Context, tenantID string) string
	audit    func(ctx context.Context, ev Event)
	key      []byte
	findings metric.Int64Counter
	known    func(ctx context.Context, tenantID string) ([]string, error)

	ents        entitySet
	entsFor     func(ctx context.Context, tenantID string) []string
	model       Recognizer
	modelErr    error
	modelPanics atomic.Int64
	budget      *modelBudget

	knownMu    sync.Mutex
	knownCache map[string]knownForms // tenant → its stored values' forms
}

var _ contexts.Guard = (*Guard)(nil)

// New returns a Guard for cfg.
func New(cfg Config) (*Guard, error) {
	g := &Guard{
		mode:    cfg.Mode,
		modeFor: cfg.ModeFor,
		audit:   cfg.Audit,
		key:     cfg.HMACKey,
		known:   cfg.Known,

		knownCache: map[string]knownForms{},
		entsFor:    cfg.EntitiesFor,
		model:      cfg.Model,
		modelErr:   cfg.ModelError,
		budget:     newModelBudget(cfg.ModelBudget),
	}
	ents, err := entitySetOf(cfg.Entities)
	if err != nil {
		return nil, err
	}
	g.ents = ents
	meter := cfg.Meter
	if meter == nil {
		meter = telemetry.Meter()
	}
	g.findings = telemetry.Counter(meter, "sandlot.guard.findings", "Egress guard findings, by type.")
	if g.mode == "" {
		g.mode = ModeEnforce
	}
	if !validMode(g.mode) {
		return nil, fmt.Errorf("guard mode %q: %w", cfg.Mode, errdefs.ErrInvalidArgument)
	}
	for task, m := range cfg.TaskModes {
		if !validMode(m) {
			return nil, fmt.Errorf("guard mode %q of task type %q: %w", m, task, errdefs.ErrInvalidArgument)
		}
	}
	g.tasks = maps.Clone(cfg.TaskModes)
	if g.tasks == nil {
		g.tasks = map[string]string{}
	}
	// What is stored is always enforced (contexts.TaskStoredRecord); no
	// setting lowers it.
	g.tasks[contexts.TaskStoredRecord] = ModeEnforce
	regions := cfg.Regions
	if regions == nil {
		regions = []string{"IE", "US"}
	}
	supported := phonenumbers.GetSupportedRegions()
	for _, r := range regions {
		r = strings.ToUpper(strings.TrimSpace(r))
		if !supported[r] {
			return nil, fmt.Errorf("guard phone region %q: %w", r, errdefs.ErrInvalidArgument)
		}
		g.regions = append(g.regions, r)
	}
	if len(g.key) == 0 {
		g.key = make([]byte, 32)
		if _, err := rand.Read(g.key); err != nil {
			return nil, fmt.Errorf("guard hmac key: %w", err)
		}
	}
	return g, nil
}

func validMode(m string) bool { return m == ModeOff || m == ModeReport || m == ModeEnforce }

type modeKey struct{}

// WithMode returns a context whose requests use mode, overriding the
// tenant's mode (for a tenant admin's per-request override; the caller
// checks the permission). An invalid mode is ignored.
func WithMode(ctx context.Context, mode string) context.Context {
	return context.WithValue(ctx, modeKey{}, mode)
}

// ModeOf returns the mode that applies to tenantID's output in ctx, per
// tenant and task type (001 §7.1): the tenant's, that is a per-request
// override (WithMode), else the mode of the tenant the request
// authenticated as (tenant.With), else Config.ModeFor, else Config.Mode;
// raised to the task type's mode (Config.TaskModes) when that is stricter.
func (g *Guard) ModeOf(ctx context.Context, tenantID string) string {
	m := g.tenantMode(ctx, tenantID)
	if floor, ok := g.tasks[contexts.TaskTypeOf(ctx)]; ok && strictness[floor] > strictness[m] {
		return floor
	}
	return m
}

// strictness orders the modes.
var strictness = map[string]int{ModeOff: 0, ModeReport: 1, ModeEnforce: 2}

// tenantMode is the mode tenantID's output gets by its tenant alone.
func (g *Guard) tenantMode(ctx context.Context, tenantID string) string {
	if m, ok := ctx.Value(modeKey{}).(string); ok && validMode(m) {
		return m
	}
	m := ""
	if t, ok := tenant.From(ctx); ok && t.ID == tenantID {
		m = t.GuardMode
	} else if g.modeFor != nil {
		m = g.modeFor(ctx, tenantID)
	}
	switch {
	case m == "":
		return g.mode
	case validMode(m):
		return m
	}
	return ModeEnforce // fail closed
}

// Scan returns the findings in text, ordered by Start, not overlapping.
func (g *Guard) Scan(text string) []Finding {
	return g.scan(text)
}

// Redact applies mode to text and returns the result and the findings
// (nil in off mode). It calls no Audit hook and counts nothing.
func (g *Guard) Redact(mode, text string) (string, []Finding) {
	if mode == ModeOff {
		return text, nil
	}
	fs := g.scan(text)
	if mode == ModeReport {
		return text, fs
	}
	return apply(text, fs), fs
}

// Text implements contexts.Guard.
func (g *Guard) Text(ctx context.Context, tenantID, s string) string {
	mode := g.ModeOf(ctx, tenantID)
	if mode == ModeOff || s == "" {
		return s
	}
	fs := g.scanCtx(ctx, tenantID, s)
	for _, f := range fs {
		g.record(ctx, tenantID, mode, f, s[f.Start:f.End], 0)
	}
	if mode == ModeReport {
		return s
	}
	return apply(s, fs)
}

// record counts one finding and audits it; base shifts offsets for
// streams.
func (g *Guard) record(ctx context.Context, tenantID, mode string, f Finding, value string, base int) {
	g.findings.Add(ctx, 1, metric.WithAttributes(attribute.String("type", f.Type)))
	if g.audit == nil {
		return
	}
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte(value))
	g.audit(ctx, Event{
		TenantID: tenantID,
		Mode:     mode,
		Task:     contexts.TaskTypeOf(ctx),
		Type:     f.Type,
		Start:    base + f.Start,
		End:      base + f.End,
		HMAC:     hex.EncodeToString(m.Sum(nil)),
	})
}

// Marker returns the replacement text for a finding type.
func Marker(typ string) string { return "[REDACTED:" + typ + "]" }

// apply replaces each finding (ordered, not overlapping) with its marker.
func apply(s string, fs []Finding) string {
	if len(fs) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, f := range fs {
		b.WriteString(s[last:f.Start])
		b.WriteString(Marker(f.Type))
		last = f.End
	}
	b.WriteString(s[last:])
	return b.String()
}
