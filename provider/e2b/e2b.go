// Package e2b is a contexts.Provider backed by E2B: a Go client for the E2B
// REST API (sandbox lifecycle) and for envd (processes and files, Connect
// RPC with the JSON codec) plus the code interpreter (/execute NDJSON). It
// works against E2B's cloud or any E2B-compatible server, sandlot itself
// included.
package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
)

// Defaults.
const (
	DefaultAPIURL         = "https://api.e2b.app"
	DefaultDomain         = "e2b.app"
	DefaultTemplate       = "code-interpreter-v1"
	DefaultConnectTimeout = 10 * time.Second
	DefaultExtendEvery    = 30 * time.Second
	DefaultTTL            = 15 * time.Minute
	DefaultCallTimeout    = 30 * time.Second
	// DefaultListPages bounds List: at 100 sandboxes a page, 10,000
	// sandboxes of one deployment.
	DefaultListPages = 100

	// labelManaged marks the sandboxes sandlot created, and
	// labelDeployment the deployment that created them: List filters on
	// both. Neither starts with "sandlot.", which sandlot's own E2B
	// surface refuses, so they also work sandlot behind sandlot.
	labelManaged    = "managedBy"
	managedValue    = "sandlot"
	labelDeployment = "sandlotDeployment"
	// labelTTL keeps a sandbox's TTL (whole seconds) on E2B's side, so a
	// daemon that attaches after a restart keeps extending it by the same
	// amount.
	labelTTL = "sandlotTTL"

	// DefaultDeployment is the deployment id of a Config without one.
	DefaultDeployment = "default"
)

// ErrNoAPIKey is returned by Create when no API key is configured. Its
// message is exactly "E2B API key not configured"; it is in the
// errdefs.ErrUnavailable category so a provider chain falls back.
var ErrNoAPIKey error = noKeyError{}

type noKeyError struct{}

func (noKeyError) Error() string { return "E2B API key not configured" }
func (noKeyError) Unwrap() error { return errdefs.ErrUnavailable }

// Config configures the provider. Zero values are documented per field.
type Config struct {
	// APIKey is the E2B API key (E2B_API_KEY). Empty: Create fails with
	// ErrNoAPIKey.
	APIKey string
	// APIURL is the control plane. Empty: DefaultAPIURL.
	APIURL string
	// SandboxURL, when set, receives every sandbox call with the
	// E2b-Sandbox-Id and E2b-Sandbox-Port headers (as E2B_SANDBOX_URL does
	// for the SDKs; sandlot's own E2B surface works this way). Empty:
	// https://<port>-<sandboxID>.<Domain>.
	SandboxURL string
	// Domain of sandbox hosts. Empty: DefaultDomain.
	Domain string
	// Template is the E2B template started for sandlot's default template
	// (contexts.DefaultTemplate, "default") and for an empty Spec.Template;
	// any other Spec.Template is sent as is. Empty: DefaultTemplate.
	Template string
	// ConnectTimeout bounds connecting to E2B and the create call, so an
	// unreachable or silent service fails fast. Zero: 10 s.
	ConnectTimeout time.Duration
	// CallTimeout bounds every other control-plane call (list pages,
	// connect, kill, timeout changes), so a service that accepts and then
	// stays silent never holds a cleanup pass or the daemon's start.
	// Zero: DefaultCallTimeout.
	CallTimeout time.Duration
	// ListPages bounds the pages List reads. Zero: DefaultListPages.
	ListPages int
	// Sizes are E2B templates built with given resources. E2B's create
	// call takes no CPU or memory: a template fixes them when it is built
	// (cpuCount, memoryMB). A sandbox of sandlot's default template whose
	// Spec.Limits ask for CPUs or memory starts from the smallest size that
	// gives both; none big enough is failed_precondition. Empty: the
	// Template, whatever the limits (they are recorded as metadata only).
	Sizes []Size
	// ExtendEvery throttles the sandbox timeout extension done on each
	// operation. Zero: 30 s.
	ExtendEvery time.Duration
	// HTTPClient for all calls. Nil: one with ConnectTimeout as dial bound.
	// Its transport is wrapped by the one that retries idempotent calls.
	HTTPClient *http.Client
	// Retries is how many times an idempotent call is tried again after a
	// transient failure (retry.go). Zero: DefaultRetries; negative: none.
	Retries int
	// Logger; nil discards.
	Logger *slog.Logger
	// Deployment names this sandlot deployment on the E2B account: Create
	// labels every sandbox with it (metadata sandlotDeployment) and List
	// returns only sandboxes with its label, so the reconcile and sweep of
	// one deployment never see, and so never kill, another's sandboxes on
	// the same account. At most 128 bytes of [A-Za-z0-9._-]; others
	// are replaced by '_'. Empty: DefaultDeployment, shared by every
	// deployment that leaves it empty (sandlot serve always sets one).
	Deployment string
}

// Size is an E2B template and the resources it was built with.
type Size struct {
	Template string
	CPU      int // cpuCount
	MemoryMB int // memoryMB
}

// ParseSizes reads sizes written "template:cpus:memoryMB", comma-separated
// ("" is none).
func ParseSizes(s string) ([]Size, error) {
	var out []Size
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		parts := strings.Split(f, ":")
		if len(parts) != 3 || parts[0] == "" {
			return nil, fmt.Errorf("size %q: want template:cpus:memoryMB: %w", f, errdefs.ErrInvalidArgument)
		}
		cpu, err1 := strconv.Atoi(parts[1])
		mem, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil || cpu <= 0 || mem <= 0 {
			return nil, fmt.Errorf("size %q: cpus and memoryMB must be positive whole numbers: %w", f, errdefs.ErrInvalidArgument)
		}
		out = append(out, Size{Template: parts[0], CPU: cpu, MemoryMB: mem})
	}
	return out, nil
}

// pickSize returns the smallest size (by memory, then CPUs) that gives at
// least what l asks for.
func pickSize(sizes []Size, l contexts.Limits) (Size, error) {
	cpu, mem := int(math.Ceil(l.CPUs)), int((l.MemoryBytes+(1<<20)-1)>>20)
	var best *Size
	for i, s := range sizes {
		if s.CPU < cpu || s.MemoryMB < mem {
			continue
		}
		if best == nil || s.MemoryMB < best.MemoryMB || s.MemoryMB == best.MemoryMB && s.CPU < best.CPU {
			best = &sizes[i]
		}
	}
	if best == nil {
		return Size{}, fmt.Errorf("no E2B template size gives %d CPUs and %d MiB: %w", cpu, mem, errdefs.ErrFailedPrecondition)
	}
	return *best, nil
}

// Provider creates E2B sandboxes. It is safe for concurrent use.
type Provider struct {
	cfg  Config
	http *http.Client
	log  *slog.Logger
}

var _ contexts.Provider = (*Provider)(nil)

// New returns an E2B provider.
func New(cfg Config) *Provider {
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	cfg.SandboxURL = strings.TrimRight(cfg.SandboxURL, "/")
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.Template == "" {
		cfg.Template = DefaultTemplate
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ExtendEvery <= 0 {
		cfg.ExtendEvery = DefaultExtendEvery
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ListPages <= 0 {
		cfg.ListPages = DefaultListPages
	}
	cfg.Deployment = deploymentID(cfg.Deployment)
	if cfg.Retries == 0 {
		cfg.Retries = DefaultRetries
	}
	p := &Provider{cfg: cfg, log: cfg.Logger}
	client := http.Client{}
	if cfg.HTTPClient != nil {
		client = *cfg.HTTPClient
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSHandshakeTimeout = cfg.ConnectTimeout
		client.Transport = tr
	}
	if cfg.Retries > 0 {
		client.Transport = &retryTransport{base: client.Transport, retries: cfg.Retries}
	}
	p.http = &client
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// Name implements contexts.Provider.
func (p *Provider) Name() string { return "e2b" }

// Capabilities implements contexts.Provider: usage, from E2B's metrics,
// and shared: every node with the account reaches a sandbox by id.
// E2B's API also pauses and resumes; this client does not call those yet.
func (p *Provider) Capabilities() contexts.Capabilities {
	return contexts.CapUsage | contexts.CapShared
}

// Pause implements contexts.Provider: not supported.
func (p *Provider) Pause(ctx context.Context, sandboxID string) error {
	return contexts.NotSupported(p.Name(), contexts.CapPause)
}

// Resume implements contexts.Provider: not supported.
func (p *Provider) Resume(ctx context.Context, sandboxID string) error {
	return contexts.NotSupported(p.Name(), contexts.CapPause)
}

// metricBody is one of E2B's SandboxMetric samples: memory used (without
// the page cache) and the page cache, disk used, in bytes, and the share
// of the sandbox's CPUs used since the sample before, in percent.
type metricBody struct {
	TimestampUnix int64   `json:"timestampUnix"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       int64   `json:"memUsed"`
	MemCache      int64   `json:"memCache"`
	DiskUsed      int64   `json:"diskUsed"`
}

// Usage implements contexts.Provider from E2B's metrics of the sandbox
// (GET /sandboxes/{id}/metrics), its newest sample: memory (used plus
// page cache, as a cgroup counts it), page cache, disk and the CPU share.
// E2B samples every few seconds; a sandbox with no sample yet is
// unavailable (the next cleanup pass asks again).
func (p *Provider) Usage(ctx context.Context, sandboxID string) (contexts.ResourceUsage, error) {
	if p.cfg.APIKey == "" {
		return contexts.ResourceUsage{}, ErrNoAPIKey
	}
	var samples []metricBody
	if err := p.api(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(sandboxID)+"/metrics", nil, &samples); err != nil {
		return contexts.ResourceUsage{}, fmt.Errorf("e2b usage of %s: %w", sandboxID, err)
	}
	if len(samples) == 0 {
		return contexts.ResourceUsage{}, fmt.Errorf("e2b usage of %s: no metrics sample yet: %w", sandboxID, errdefs.ErrUnavailable)
	}
	last := samples[0]
	for _, s := range samples[1:] {
		if s.TimestampUnix >= last.TimestampUnix {
			last = s
		}
	}
	if last.MemUsed < 0 || last.MemCache < 0 || last.MemUsed > math.MaxInt64-last.MemCache || last.DiskUsed < 0 ||
		last.CPUUsedPct < 0 || math.IsNaN(last.CPUUsedPct) {
		return contexts.ResourceUsage{}, fmt.Errorf("e2b usage of %s: figures out of range in the sample: %w", sandboxID, errdefs.ErrUnavailable)
	}
	return contexts.ResourceUsage{MemoryBytes: last.MemUsed + last.MemCache, CacheBytes: last.MemCache,
		DiskBytes: last.DiskUsed, CPUPct: last.CPUUsedPct}, nil
}

type createBody struct {
	TemplateID string            `json:"templateID"`
	Timeout    int64             `json:"timeout,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	EnvVars    map[string]string `json:"envVars,omitempty"`
	// AllowInternetAccess is always sent: E2B's default is open, and the
	// execution-context spec forbids unrestricted internet unless the
	// policy (capped by the operator) asks for it.
	AllowInternetAccess *bool              `json:"allow_internet_access"`
	Network             *policy.E2BNetwork `json:"network,omitempty"`
}

// networkBody sets a create body's network fields from spec.Network:
// none (nil policy or mode none) is internet off; an allowlist is
// allowOut with everything else denied; open is open minus denyOut.
// Secrets cannot be injected by E2B's cloud: a policy naming any is
// refused.
func networkBody(body *createBody, p *policy.Policy) error {
	off := false
	if p == nil {
		body.AllowInternetAccess = &off
		return nil
	}
	if len(p.Secrets) > 0 {
		return fmt.Errorf("the e2b provider cannot inject secrets at the edge: %w", errdefs.ErrFailedPrecondition)
	}
	allow, n := policy.ToE2B(*p)
	body.AllowInternetAccess = allow
	body.Network = &n
	return nil
}

type sandboxBody struct {
	SandboxID       string `json:"sandboxID"`
	TemplateID      string `json:"templateID"`
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken"`
	Domain          string `json:"domain"`
}

// Create implements contexts.Provider: it starts a sandbox whose E2B
// timeout is spec.TTL and waits until envd answers.
func (p *Provider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	if p.cfg.APIKey == "" {
		return nil, ErrNoAPIKey
	}
	if len(spec.Volumes) > 0 {
		return nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are not supported by provider e2b")
	}
	ttl := spec.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	// sandlot's default template (what the manager names when a caller
	// names none) is the configured E2B template; other names are E2B's.
	tmpl := spec.Template
	if tmpl == "" || tmpl == contexts.DefaultTemplate {
		tmpl = p.cfg.Template
	}
	meta := map[string]string{}
	for k, v := range spec.Labels {
		meta[labelKey(k)] = v
	}
	meta[labelManaged], meta[labelDeployment] = managedValue, p.cfg.Deployment
	meta[labelTTL] = strconv.FormatInt(int64(ttl/time.Second), 10)
	if (spec.Template == "" || spec.Template == contexts.DefaultTemplate) && len(p.cfg.Sizes) > 0 {
		size, err := pickSize(p.cfg.Sizes, spec.Limits)
		if err != nil {
			return nil, err
		}
		tmpl = size.Template
		meta["cpuCount"], meta["memoryMB"] = strconv.Itoa(size.CPU), strconv.Itoa(size.MemoryMB)
	} else {
		if spec.Limits.CPUs > 0 {
			meta["cpuCount"] = strconv.Itoa(int(math.Ceil(spec.Limits.CPUs)))
		}
		if spec.Limits.MemoryBytes > 0 {
			meta["memoryMB"] = strconv.FormatInt(spec.Limits.MemoryBytes>>20, 10)
		}
	}
	body := createBody{TemplateID: tmpl, Timeout: int64(ttl / time.Second), Metadata: meta, EnvVars: spec.Env}
	if err := networkBody(&body, spec.Network); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	var sb sandboxBody
	if err := p.api(cctx, http.MethodPost, "/v2/sandboxes", body, &sb); err != nil {
		return nil, fmt.Errorf("e2b create: %w", err)
	}
	s := p.sandbox(sb, ttl)
	if err := s.waitHealthy(cctx); err != nil {
		p.destroyQuietly(sb.SandboxID)
		return nil, fmt.Errorf("e2b sandbox %s: %w", sb.SandboxID, err)
	}
	p.log.Info("e2b sandbox created", logkey.Sandbox, sb.SandboxID, logkey.Template, tmpl)
	return s, nil
}

// labelKey is a Spec.Labels key as E2B metadata: sandlot's own labels
// ("sandlot.tenant") become "sandlotTenant". An E2B-compatible server may
// refuse keys under "sandlot." (sandlot's own E2B surface keeps them to
// itself and refuses them), and E2B's list filter then reads the same
// through its double URL encoding.
func labelKey(k string) string {
	rest, ok := strings.CutPrefix(k, contexts.ReservedPrefix)
	if !ok || rest == "" {
		return k
	}
	return "sandlot" + strings.ToUpper(rest[:1]) + rest[1:]
}

func (p *Provider) destroyQuietly(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
	defer cancel()
	if err := p.Destroy(ctx, id); err != nil {
		p.log.Warn("e2b destroy after failed create", logkey.Sandbox, id, logkey.Err, err)
	}
}

// Attach implements contexts.Provider. The sandbox's TTL comes back from
// its labelTTL metadata, so a restarted daemon extends it as before; the
// connect call sets the timeout to that TTL from now.
func (p *Provider) Attach(ctx context.Context, sandboxID string) (contexts.Sandbox, error) {
	if p.cfg.APIKey == "" {
		return nil, ErrNoAPIKey
	}
	path := "/sandboxes/" + url.PathEscape(sandboxID)
	var info struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := p.api(ctx, http.MethodGet, path, nil, &info); err != nil {
		return nil, fmt.Errorf("e2b attach %s: %w", sandboxID, err)
	}
	var ttl time.Duration
	if n, err := strconv.ParseInt(info.Metadata[labelTTL], 10, 64); err == nil && n > 0 {
		ttl = time.Duration(n) * time.Second
	}
	body := map[string]any{}
	if ttl > 0 {
		body["timeout"] = int64(ttl / time.Second)
	}
	var sb sandboxBody
	if err := p.api(ctx, http.MethodPost, "/v2"+path+"/connect", body, &sb); err != nil {
		return nil, fmt.Errorf("e2b attach %s: %w", sandboxID, err)
	}
	if sb.SandboxID == "" {
		sb.SandboxID = sandboxID
	}
	return p.sandbox(sb, ttl), nil
}

// List implements contexts.Provider: the running sandboxes this
// deployment made. The metadata filter is "k=v&k2=v2", each key and value
// escaped once more, as the E2B SDKs send it.
func (p *Provider) List(ctx context.Context) ([]string, error) {
	if p.cfg.APIKey == "" {
		return nil, ErrNoAPIKey
	}
	filter := url.Values{labelManaged: {managedValue}, labelDeployment: {p.cfg.Deployment}}.Encode()
	var ids []string
	next := ""
	for page := 0; ; page++ {
		if page == p.cfg.ListPages {
			return nil, fmt.Errorf("e2b list: more than %d pages of sandboxes: %w", p.cfg.ListPages, errdefs.ErrResourceExhausted)
		}
		q := url.Values{"metadata": {filter}, "limit": {"100"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		var items []struct {
			SandboxID string `json:"sandboxID"`
		}
		hdr, err := p.apiHeader(ctx, http.MethodGet, "/v2/sandboxes?"+q.Encode(), nil, &items)
		if err != nil {
			return nil, fmt.Errorf("e2b list: %w", err)
		}
		for _, it := range items {
			ids = append(ids, it.SandboxID)
		}
		if next = hdr.Get(e2bwire.HeaderNextToken); next == "" || len(items) == 0 {
			return ids, nil
		}
	}
}

// deploymentID is id with every byte outside [A-Za-z0-9._-] replaced, cut
// to 128 bytes, or DefaultDeployment when empty: a value that reads the
// same after any number of URL decodings.
func deploymentID(id string) string {
	if id == "" {
		return DefaultDeployment
	}
	b := []byte(id)
	if len(b) > 128 {
		b = b[:128]
	}
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Destroy implements contexts.Provider; an unknown id is not an error.
func (p *Provider) Destroy(ctx context.Context, sandboxID string) error {
	if p.cfg.APIKey == "" {
		return ErrNoAPIKey
	}
	err := p.api(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(sandboxID), nil, nil)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("e2b destroy %s: %w", sandboxID, err)
	}
	return nil
}

// sandbox builds the client of one sandbox.
func (p *Provider) sandbox(sb sandboxBody, ttl time.Duration) *Sandbox {
	s := &Sandbox{p: p, id: sb.SandboxID, token: sb.EnvdAccessToken, ttl: ttl, lastExtend: time.Now(), kernels: map[string]*kernel{}}
	domain := sb.Domain
	if domain == "" {
		domain = p.cfg.Domain
	}
	base := func(port string) string {
		if p.cfg.SandboxURL != "" {
			return p.cfg.SandboxURL
		}
		return "https://" + port + "-" + sb.SandboxID + "." + domain
	}
	s.envdURL, s.interpURL = base(e2bwire.EnvdPort), base(e2bwire.InterpreterPort)
	s.envd = &http.Client{Transport: &headerTransport{base: p.http.Transport, hdr: s.headers(e2bwire.EnvdPort)}}
	s.interp = &http.Client{Transport: &headerTransport{base: p.http.Transport, hdr: s.headers(e2bwire.InterpreterPort)}}
	s.initRPC()
	return s
}

// headerTransport adds the sandbox routing and auth headers to every call.
type headerTransport struct {
	base http.RoundTripper
	hdr  http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.hdr {
		r.Header[k] = v
	}
	if user := agent.UserOf(r.Context()); user != "" && user != agent.DefaultUser {
		// The call's user (agent.WithUser; Exec puts ExecParams.User
		// there): envd reads it from Basic auth on its RPCs and from the
		// username query on /files. Without it a call as root would run
		// as the sandbox's default user.
		r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
		if r.URL.Path == "/files" {
			q := r.URL.Query()
			q.Set("username", user)
			r.URL.RawQuery = q.Encode()
		}
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}
