// Package templates owns sandlot's templates: an image of the image store
// plus the settings a sandbox of it starts with (user, working directory,
// environment, start command, kernels, resource defaults). A template
// belongs to one tenant or, with an empty TenantID, is public: visible to
// every tenant, written only by the operator.
//
// This file is the record and the Store the persistence backends
// implement; catalog.go resolves, pulls, imports, lists and deletes them,
// with the built-in templates beside the records. docs/images-templates.md
// ("Templates") records the design.
package templates

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// Template is one template record. Records are immutable: a new version is
// a new record (delete, then pull or import again).
type Template struct {
	// ID is unique across tenants: 20 lowercase letters and digits (the
	// shape of E2B's template ids), or a built-in's name.
	ID string `json:"id"`
	// TenantID owns the template; "" is a public template.
	TenantID string `json:"tenantId,omitempty"`
	// Name is unique per tenant (and among public templates): the alias
	// users create sandboxes by.
	Name string `json:"name"`
	// Image is the manifest digest of the image in the store.
	Image string `json:"image"`
	// Source says where the image came from: a registry reference, or
	// "import".
	Source    string    `json:"source,omitempty"`
	Settings  Settings  `json:"settings"`
	CreatedAt time.Time `json:"createdAt"`
}

// Public reports whether every tenant sees t.
func (t Template) Public() bool { return t.TenantID == "" }

// Settings are what a sandbox of the template starts with. Zero values
// mean the image's or the daemon's.
type Settings struct {
	// User runs the sandbox's commands; "" or "user": the sandbox user
	// (uid 1000). Other users need execs as another user in the agent.
	User string `json:"user,omitempty"`
	// Workdir is the base of relative paths and the commands' working
	// directory; "": the image's WorkingDir, else /home/user.
	Workdir string `json:"workdir,omitempty"`
	// Env is added to the image's environment (a request's env on top).
	Env map[string]string `json:"env,omitempty"`
	// StartCmd runs (through /bin/sh -c, in the background) when a
	// sandbox starts.
	StartCmd string `json:"startCmd,omitempty"`
	// ReadyCmd, with StartCmd, is run (through /bin/sh -c) until it
	// exits 0 before a new sandbox is handed out: what E2B's setStartCmd
	// waits for before it snapshots a template.
	ReadyCmd string `json:"readyCmd,omitempty"`
	// Kernels are the languages run_code offers on this template (python,
	// javascript, typescript, bash, sh, r, java); empty: all of them.
	Kernels []string `json:"kernels,omitempty"`
	// Prestart are the kernels started at boot; a subset of Kernels, where
	// "ipython" is the python kernel with IPython imported (the first
	// IPython cell does not pay the import).
	Prestart []string `json:"prestart,omitempty"`
	// IdleSuspendSeconds suspends the template's idle contexts to disk
	// after that many seconds without a call (contexts.Config.IdleSuspendOf:
	// the smallest of the daemon's, the template's and the tenant's wins);
	// 0: no setting of the template's.
	IdleSuspendSeconds int64     `json:"idleSuspendSeconds,omitempty"`
	Resources          Resources `json:"resources,omitempty"`
}

// Resources are a template's defaults for its sandboxes' limits; zero:
// the daemon's. A tenant's template may lower the daemon's limits, never
// raise them; a public template (the operator's) may.
type Resources struct {
	CPUs        float64 `json:"cpus,omitempty"`
	MemoryBytes int64   `json:"memoryBytes,omitempty"`
	DiskBytes   int64   `json:"diskBytes,omitempty"`
	PIDs        int64   `json:"pids,omitempty"`
}

// clone is s with its own maps and slices.
func (s Settings) clone() Settings {
	s.Env = maps.Clone(s.Env)
	s.Kernels = slices.Clone(s.Kernels)
	s.Prestart = slices.Clone(s.Prestart)
	return s
}

// Languages are every kernel a template can offer.
var Languages = []string{agent.Python, agent.JavaScript, agent.TypeScript, agent.Bash, agent.Sh, agent.R, agent.Java}

// DefaultImageKernels are the kernels of the Debian base the daemon builds
// as the default template (image/debian.DefaultPackages: python3, nodejs,
// bash; no R, no JDK, which the code-interpreter template adds).
var DefaultImageKernels = []string{agent.Python, agent.JavaScript, agent.TypeScript, agent.Bash, agent.Sh}

// Offers reports whether the template's kernels include language.
func (s Settings) Offers(language string) bool {
	if language == agent.PrestartIPython { // as a prestart: python with IPython imported
		language = agent.Python
	}
	return len(s.Kernels) == 0 || slices.Contains(s.Kernels, language)
}

// OfferedLanguages is Kernels, or every language when Kernels is empty.
func (s Settings) OfferedLanguages() []string {
	if len(s.Kernels) == 0 {
		return Languages
	}
	return s.Kernels
}

// Store keeps template records. Every backend implements it the same way
// (store/storetest); when ctx carries a tenant (tenant.WithID) a statement
// only sees that tenant's templates and the public ones, and writes only
// that tenant's (Postgres enforces it with row-level security).
type Store interface {
	// CreateTemplate stores t (Prepare fills its ID and CreatedAt);
	// ErrAlreadyExists when its tenant (or the public set) has the name,
	// ErrNotFound when its tenant does not exist.
	CreateTemplate(ctx context.Context, t Template) (Template, error)
	// GetTemplate finds ref among tenantID's templates and the public
	// ones: by name (the tenant's own first), then by id. tenantID ""
	// looks among the public ones only.
	GetTemplate(ctx context.Context, tenantID, ref string) (Template, error)
	// TemplateByID finds a template of any tenant by id (the daemon's
	// lookup when it starts a sandbox); a scoped ctx sees its own and the
	// public ones only.
	TemplateByID(ctx context.Context, id string) (Template, error)
	// ListTemplates returns tenantID's templates and the public ones,
	// sorted by name then tenant (public first). All: every tenant's
	// (unscoped ctx only; the GC's question).
	ListTemplates(ctx context.Context, tenantID string, all bool) ([]Template, error)
	// DeleteTemplate removes tenantID's template id ("" for a public
	// one). ErrNotFound when tenantID has no such template.
	DeleteTemplate(ctx context.Context, tenantID, id string) error
}

// nameRE: what E2B accepts for an alias, and nothing that could be read as
// an image reference or a path.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// idRE is the shape of a generated id.
var idRE = regexp.MustCompile(`^[a-z0-9]{20}$`)

// The built-in templates: not records, answered by the catalog for every
// tenant. Their id is their name.
const (
	// Default is the template an empty name means: the image named
	// "default" in the store (the Debian base, unless the operator put
	// another there).
	Default = "default"
	// Host is the host's /usr, read-only, without /usr/local, where the
	// daemon enables it.
	Host = "host"
	// Desktop is the desktop template (Xvfb, XFCE, Chromium, noVNC: the
	// desktop package), where the daemon offers it: the image named
	// "desktop" in the store, built from Debian's mirror on first use.
	Desktop = "desktop"
	// CodeInterpreter is the default template's packages plus R and a JDK
	// (the r and java kernels' interpreters: the codeinterp package),
	// where the daemon offers it: the image named "code-interpreter" in
	// the store, built from Debian's mirror on first use.
	CodeInterpreter = "code-interpreter"
)

// Reserved names are the built-in templates'.
var Reserved = []string{Default, Host, Desktop, CodeInterpreter}

// CheckName validates a template name: NAME or NAME:TAG, NAME's tag
// LatestTag being the bare NAME (tags.go).
func CheckName(name string) error {
	base, tag, tagged := strings.Cut(name, ":")
	if !nameRE.MatchString(base) {
		return fmt.Errorf("template name %q: want 1-63 of [a-z0-9_-], starting with a letter or digit, and an optional :tag: %w", name, errdefs.ErrInvalidArgument)
	}
	if tagged {
		if err := checkTag(tag); err != nil {
			return fmt.Errorf("template name %q: %w", name, err)
		}
		if tag == LatestTag {
			return fmt.Errorf("template name %q: the tag %s is the bare name %s: %w", name, LatestTag, base, errdefs.ErrInvalidArgument)
		}
	}
	if slices.Contains(Reserved, base) {
		return fmt.Errorf("template name %q is a built-in template's: %w", name, errdefs.ErrAlreadyExists)
	}
	return nil
}

// NewID returns a fresh template id.
func NewID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Prepare validates t for CreateTemplate and fills its ID (when empty) and
// CreatedAt (when zero) from now.
func Prepare(t *Template, now time.Time) error {
	if err := CheckName(t.Name); err != nil {
		return err
	}
	if t.ID == "" {
		t.ID = NewID()
	} else if !idRE.MatchString(t.ID) {
		return fmt.Errorf("template id %q: want 20 of [a-z0-9]: %w", t.ID, errdefs.ErrInvalidArgument)
	}
	if _, err := v1.NewHash(t.Image); err != nil {
		return fmt.Errorf("template %s: image %q is not a digest: %w", t.Name, t.Image, errdefs.ErrInvalidArgument)
	}
	if len(t.Source) > 1024 {
		return fmt.Errorf("template %s: source of %d bytes: %w", t.Name, len(t.Source), errdefs.ErrInvalidArgument)
	}
	if err := t.Settings.Validate(); err != nil {
		return fmt.Errorf("template %s: %w", t.Name, err)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	t.CreatedAt = t.CreatedAt.UTC().Truncate(time.Millisecond)
	if len(t.Settings.Env) == 0 {
		t.Settings.Env = nil
	}
	return nil
}

var userRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$|^[0-9]{1,10}$`)

// Validate checks the settings' shapes (not whether the image has the
// user or the directory: the sandbox finds out).
func (s Settings) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalidArgument)...)
	}
	if s.User != "" && !userRE.MatchString(s.User) {
		return bad("user %q: a user name or uid", s.User)
	}
	if s.Workdir != "" && (!path.IsAbs(s.Workdir) || path.Clean(s.Workdir) != s.Workdir || len(s.Workdir) > 1024) {
		return bad("workdir %q: want a clean absolute path", s.Workdir)
	}
	if len(s.Env) > 256 {
		return bad("%d environment variables (at most 256)", len(s.Env))
	}
	for k, v := range s.Env {
		if !envRE.MatchString(k) || len(v) > 32<<10 {
			return bad("environment variable %q: a portable name and a value of at most 32 KiB", k)
		}
	}
	if len(s.StartCmd) > 16<<10 || len(s.ReadyCmd) > 16<<10 {
		return bad("start or ready command of %d bytes (at most 16 KiB)", max(len(s.StartCmd), len(s.ReadyCmd)))
	}
	if s.ReadyCmd != "" && s.StartCmd == "" {
		return bad("a ready command without a start command")
	}
	for _, k := range s.Kernels {
		if !slices.Contains(Languages, k) {
			return bad("kernel %q: one of %v", k, Languages)
		}
	}
	for _, k := range s.Prestart {
		if !s.Offers(k) {
			return bad("prestart kernel %q is not one the template offers (%v)", k, s.OfferedLanguages())
		}
	}
	if s.IdleSuspendSeconds < 0 {
		return bad("idleSuspendSeconds %d: want 0 (none) or more", s.IdleSuspendSeconds)
	}
	r := s.Resources
	if r.CPUs < 0 || r.MemoryBytes < 0 || r.DiskBytes < 0 || r.PIDs < 0 {
		return bad("negative resources %+v", r)
	}
	return nil
}

var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
