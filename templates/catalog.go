package templates

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/source"
	"github.com/sandlot/sandlot/network"
)

// Config configures a Catalog. Zero values are documented per field.
type Config struct {
	// Store keeps the records; required.
	Store Store
	// Images is the image store templates' images live in; nil: no
	// images (only the host template, as `sandlot run` has), so pulls and
	// imports fail with failed_precondition.
	Images *image.Store
	// HostTemplate offers the built-in "host" template. Without Images it
	// is always offered, and "default" means it.
	HostTemplate bool
	// Desktop offers the built-in "desktop" template (needs Images), with
	// these settings (its resource defaults). nil: not offered.
	Desktop *Settings
	// CodeInterpreter offers the built-in "code-interpreter" template
	// (needs Images): the default template's packages plus R and Java.
	CodeInterpreter bool
	// DefaultKernels are the languages the built-in "default" template's
	// image has (DefaultImageKernels for the Debian base the daemon
	// builds), so a call in another is refused before a sandbox is made.
	// nil: not known (an image the operator named "default"), all offered.
	DefaultKernels []string
	// Pull configures registry pulls (credentials, transport); its Name
	// and Progress are set per pull. Its Keychain (nil: the daemon's docker
	// config) serves public templates, the operator's.
	Pull source.PullOptions
	// TenantKeychain supplies credentials for tenants' pulls. nil:
	// anonymous, so a tenant cannot pull a private image with the
	// credentials the operator's docker config holds.
	TenantKeychain authn.Keychain
	// Builtins returns the image digest of a built-in template (Default,
	// Desktop, CodeInterpreter) as the daemon pinned it: the image the
	// store had for it when the daemon started, or the one the daemon
	// built since; false while there is none. A built-in resolves only
	// through it, never through a name in the image store, whose names
	// are shared with everything that writes the store. nil: the store's
	// name of the built-in, read at the built-in's first use and kept
	// from then on (tests and tools that own their store).
	Builtins func(name string) (v1.Hash, bool)
	// PullAllow are the address ranges a tenant's pull may connect to
	// besides the public internet. Every connection of a tenant's pull
	// (redirects included) goes through network.DialGuard: loopback,
	// private, link-local, CGNAT, metadata, unspecified and the host's own
	// addresses are refused (permission_denied) unless listed here (the
	// metadata and host addresses only as single addresses). The
	// operator's public pulls are not restricted.
	PullAllow []netip.Prefix
	// Snapshots keeps snapshot records (snapshot.go); nil: the daemon
	// takes no snapshots (failed_precondition).
	Snapshots SnapshotStore
	// MaxSnapshots bounds a tenant's snapshots; 0: DefaultMaxSnapshots.
	MaxSnapshots int
	// SnapshotBytes bounds a snapshot's captured layer (file bytes,
	// apparent sizes); 0: DefaultSnapshotBytes.
	SnapshotBytes int64
	// Logger; nil discards.
	Logger *slog.Logger
}

// Catalog resolves, lists, pulls, imports and deletes templates: the
// records of a Store and the built-in templates. Safe for concurrent use.
type Catalog struct {
	cfg Config
	log *slog.Logger

	guardOnce sync.Once
	guarded   http.RoundTripper // tenants' pulls; made on first use

	mu   sync.Mutex
	byID map[string]Template // records by id (immutable, so cached); under mu
	pins map[string]v1.Hash  // built-ins' images pinned at first use (Builtins nil); under mu
}

// New returns a catalog.
func New(cfg Config) *Catalog {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Catalog{cfg: cfg, log: cfg.Logger, byID: map[string]Template{}, pins: map[string]v1.Hash{}}
}

// builtin returns the built-in template name, if this catalog offers it;
// withImage fills its pinned image (builtinImage; "" while it has none:
// the daemon may still be building it). TemplateInfo, asked on every
// run, does without.
func (c *Catalog) builtin(ctx context.Context, name string, withImage bool) (Template, bool) {
	var t Template
	switch {
	case name == Default && c.cfg.Images != nil:
		t = Template{ID: Default, Name: Default, Source: "built-in", Settings: Settings{Kernels: slices.Clone(c.cfg.DefaultKernels)}}
	case name == Desktop && c.cfg.Desktop != nil && c.cfg.Images != nil:
		t = Template{ID: Desktop, Name: Desktop, Source: "built-in", Settings: c.cfg.Desktop.clone()}
	case name == CodeInterpreter && c.cfg.CodeInterpreter && c.cfg.Images != nil:
		t = Template{ID: CodeInterpreter, Name: CodeInterpreter, Source: "built-in"}
	case name == Host && (c.cfg.HostTemplate || c.cfg.Images == nil), name == Default && c.cfg.Images == nil:
		return Template{ID: name, Name: name, Source: "host"}, true
	default:
		return Template{}, false
	}
	if withImage {
		t.Image = c.builtinImage(ctx, name)
	}
	return t, true
}

// builtinImage is the image digest built-in name is pinned to
// (Config.Builtins), "" when it has none yet. Without Config.Builtins the
// store's name is read until it first names an image, which is then kept:
// a name moved later (by anyone who can write the store) moves nothing.
func (c *Catalog) builtinImage(ctx context.Context, name string) string {
	if c.cfg.Builtins != nil {
		if d, ok := c.cfg.Builtins(name); ok {
			return d.String()
		}
		return ""
	}
	c.mu.Lock()
	d, ok := c.pins[name]
	c.mu.Unlock()
	if ok {
		return d.String()
	}
	d, err := c.cfg.Images.Resolve(ctx, name)
	if err != nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pins[name]; ok {
		return p.String() // another caller pinned it first
	}
	c.pins[name] = d
	return d.String()
}

// pinned lists the built-ins' pinned images, for GC to keep (a name the
// operator moves leaves the pinned image unnamed, still in use).
func (c *Catalog) pinned() []v1.Hash {
	var out []v1.Hash
	for _, n := range []string{Default, Desktop, CodeInterpreter} {
		if c.cfg.Builtins != nil {
			if d, ok := c.cfg.Builtins(n); ok {
				out = append(out, d)
			}
			continue
		}
		c.mu.Lock()
		if d, ok := c.pins[n]; ok {
			out = append(out, d)
		}
		c.mu.Unlock()
	}
	return out
}

// Resolve finds what ref (a name or an id; "" is Default) means for
// tenantID: a built-in, the tenant's own template of that name, a public
// one of that name, or a template of that id the tenant may see.
func (c *Catalog) Resolve(ctx context.Context, tenantID, ref string) (Template, error) {
	if ref == "" {
		ref = Default
	}
	ref = Canonical(ref)
	if t, ok := c.builtin(ctx, ref, true); ok {
		return t, nil
	}
	if slices.Contains(Reserved, ref) {
		return Template{}, fmt.Errorf("template %q is not enabled on this daemon: %w", ref, errdefs.ErrNotFound)
	}
	t, err := c.cfg.Store.GetTemplate(ctx, tenantID, ref)
	if err != nil {
		return Template{}, err
	}
	c.remember(t)
	return t, nil
}

// ByID returns the template of id, of any tenant (a built-in's id is its
// name, its Image the pinned one). The daemon's own lookup when it starts
// a sandbox; records are immutable, so it is cached.
func (c *Catalog) ByID(ctx context.Context, id string) (Template, error) {
	return c.lookupID(ctx, id, true)
}

func (c *Catalog) lookupID(ctx context.Context, id string, withImage bool) (Template, error) {
	if t, ok := c.builtin(ctx, id, withImage); ok {
		return t, nil
	}
	c.mu.Lock()
	t, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := c.cfg.Store.TemplateByID(ctx, id)
	if err != nil {
		return Template{}, err
	}
	c.remember(t)
	return t, nil
}

func (c *Catalog) remember(t Template) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) > 10000 { // a bound, not a policy: the store answers the rest
		clear(c.byID)
	}
	c.byID[t.ID] = t
}

// List returns the built-ins, tenantID's templates and the public ones.
func (c *Catalog) List(ctx context.Context, tenantID string) ([]Template, error) {
	var out []Template
	for _, n := range Reserved {
		if t, ok := c.builtin(ctx, n, true); ok {
			out = append(out, t)
		}
	}
	recs, err := c.cfg.Store.ListTemplates(ctx, tenantID, false)
	if err != nil {
		return nil, err
	}
	// A suspended context's image is the context's, not a template the
	// tenant made.
	recs = slices.DeleteFunc(recs, func(t Template) bool { return t.Source == SourceSuspend })
	return append(out, recs...), nil
}

// Spec is what a new template is made of besides its image.
type Spec struct {
	Name     string
	Settings Settings
}

// check validates spec before any slow work, and makes sure the name is
// free for tenantID.
func (c *Catalog) check(ctx context.Context, tenantID string, spec Spec) error {
	if c.cfg.Images == nil {
		return fmt.Errorf("this daemon has no image store: %w", errdefs.ErrFailedPrecondition)
	}
	if err := CheckName(spec.Name); err != nil {
		return err
	}
	if err := spec.Settings.Validate(); err != nil {
		return err
	}
	if t, err := c.cfg.Store.GetTemplate(ctx, tenantID, spec.Name); err == nil && t.TenantID == tenantID {
		return fmt.Errorf("template %q: %w", spec.Name, errdefs.ErrAlreadyExists)
	} else if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	return nil
}

// Pull pulls ref from its registry (pinned by digest in the store) and
// records it as tenantID's template ("" a public one).
func (c *Catalog) Pull(ctx context.Context, tenantID, ref string, spec Spec, progress func(image.Progress)) (Template, error) {
	if err := c.check(ctx, tenantID, spec); err != nil {
		return Template{}, err
	}
	return c.record(ctx, tenantID, spec, ref, func() (v1.Hash, error) {
		opt := c.cfg.Pull
		opt.Name, opt.Progress = "", progress // the record keeps the image
		if tenantID != "" {
			opt.Untrusted = true
			opt.Keychain = c.cfg.TenantKeychain
			if opt.Keychain == nil {
				opt.Keychain = anonymous{}
			}
			opt.Transport = c.tenantTransport()
		}
		p, err := source.Pull(ctx, c.cfg.Images, ref, opt)
		return p.Digest, err
	})
}

// Import imports the one image of an OCI layout or docker-archive tarball
// at path and records it as tenantID's template.
func (c *Catalog) Import(ctx context.Context, tenantID, path string, spec Spec, progress func(image.Progress)) (Template, error) {
	if err := c.check(ctx, tenantID, spec); err != nil {
		return Template{}, err
	}
	return c.record(ctx, tenantID, spec, "import", func() (v1.Hash, error) {
		imgs, err := source.ImportFile(ctx, c.cfg.Images, path, source.ImportOptions{Progress: progress, Untrusted: tenantID != ""})
		if err != nil {
			return v1.Hash{}, err
		}
		if len(imgs) != 1 {
			return v1.Hash{}, fmt.Errorf("the archive holds %d linux/amd64 images, want one: %w", len(imgs), errdefs.ErrInvalidArgument)
		}
		return imgs[0].Digest, nil
	})
}

// record brings an image in with fetch and stores the template record.
// fetch names nothing in the image store: its names are shared by every
// tenant and the daemon (`default` is one), and an archive's or a
// reference's names are the caller's input. The record is what keeps the
// image (GC asks the records), so deleting the template lets GC take its
// layers. A lease keeps GC away until the record exists.
func (c *Catalog) record(ctx context.Context, tenantID string, spec Spec, src string, fetch func() (v1.Hash, error)) (Template, error) {
	lease, err := c.cfg.Images.Lease(ctx)
	if err != nil {
		return Template{}, err
	}
	defer lease.Release()
	digest, err := fetch()
	if err != nil {
		return Template{}, err
	}
	t, err := c.cfg.Store.CreateTemplate(ctx, Template{TenantID: tenantID, Name: spec.Name, Image: digest.String(), Source: src, Settings: spec.Settings})
	if err != nil {
		return Template{}, err
	}
	c.remember(t)
	c.log.Info("template created", slog.String("template", t.ID), slog.String("name", t.Name), slog.String("tenant", tenantID), slog.String("image", t.Image))
	return t, nil
}

// Delete removes tenantID's template ref (a name or an id). A public
// template is the operator's (tenantID ""): a tenant deleting one is
// permission_denied; a built-in cannot be deleted. Its image's layers go
// at the next GC when nothing else uses them.
func (c *Catalog) Delete(ctx context.Context, tenantID, ref string) error {
	t, err := c.Resolve(ctx, tenantID, ref)
	if err != nil {
		return err
	}
	switch {
	case t.ID == t.Name && (t.Name == Default || t.Name == Host):
		return fmt.Errorf("template %q is built in: %w", ref, errdefs.ErrFailedPrecondition)
	case t.TenantID != tenantID:
		return fmt.Errorf("template %q is public; only the operator deletes it: %w", ref, errdefs.ErrPermissionDenied)
	}
	if err := c.cfg.Store.DeleteTemplate(ctx, tenantID, t.ID); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.byID, t.ID)
	c.mu.Unlock()
	c.log.Info("template deleted", slog.String("template", t.ID), slog.String("name", t.Name), slog.String("tenant", tenantID))
	return nil
}

// GC removes the image store's layers and blobs that no template, no
// named image and no live sandbox uses (live: the provider's answer,
// asked once the store is held; nil: none).
func (c *Catalog) GC(ctx context.Context, live func(context.Context) ([]v1.Hash, error)) (image.GCStats, error) {
	if c.cfg.Images == nil {
		return image.GCStats{}, fmt.Errorf("no image store: %w", errdefs.ErrFailedPrecondition)
	}
	return c.cfg.Images.GCFunc(ctx, func(ctx context.Context) ([]v1.Hash, error) {
		var keep []v1.Hash
		if live != nil {
			var err error
			if keep, err = live(ctx); err != nil {
				return nil, err
			}
		}
		keep = append(keep, c.pinned()...)
		all, err := c.cfg.Store.ListTemplates(ctx, "", true)
		if err != nil {
			return nil, fmt.Errorf("templates in use: %w", err)
		}
		for _, t := range all {
			if h, err := v1.NewHash(t.Image); err == nil {
				keep = append(keep, h)
			}
		}
		return keep, nil
	})
}

var _ contexts.Catalog = (*Catalog)(nil)

func info(t Template) contexts.TemplateInfo {
	var langs []string
	if len(t.Settings.Kernels) > 0 {
		langs = slices.Clone(t.Settings.Kernels)
	}
	return contexts.TemplateInfo{ID: t.ID, Name: t.Name, Languages: langs, Public: t.Public()}
}

// ResolveTemplate implements contexts.Catalog.
func (c *Catalog) ResolveTemplate(ctx context.Context, tenantID, ref string) (contexts.TemplateInfo, error) {
	t, err := c.Resolve(ctx, tenantID, ref)
	if err != nil {
		return contexts.TemplateInfo{}, err
	}
	return info(t), nil
}

// TemplateInfo implements contexts.Catalog.
func (c *Catalog) TemplateInfo(ctx context.Context, id string) (contexts.TemplateInfo, error) {
	t, err := c.lookupID(ctx, id, false)
	if err != nil {
		return contexts.TemplateInfo{}, err
	}
	return info(t), nil
}

// ImportReader is Import of a tarball read from r (an upload), spooled
// into the image store's staging directory first: the archive formats
// need to seek. The caller bounds r.
func (c *Catalog) ImportReader(ctx context.Context, tenantID string, r io.Reader, spec Spec, progress func(image.Progress)) (Template, error) {
	if err := c.check(ctx, tenantID, spec); err != nil {
		return Template{}, err
	}
	// The lease keeps GC, which empties the staging directory, away.
	lease, err := c.cfg.Images.Lease(ctx)
	if err != nil {
		return Template{}, err
	}
	defer lease.Release()
	f, err := os.CreateTemp(filepath.Join(c.cfg.Images.Root(), "tmp"), "import-*.tar")
	if err != nil {
		return Template{}, err
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Template{}, err
	}
	return c.Import(ctx, tenantID, f.Name(), spec, progress)
}

// tenantTransport is the transport of tenants' pulls: every connection
// checked by network.DialGuard at dial time.
func (c *Catalog) tenantTransport() http.RoundTripper {
	c.guardOnce.Do(func() { c.guarded = network.DialGuard{Allow: c.cfg.PullAllow}.Transport() })
	return c.guarded
}

// anonymous is a keychain with no credentials for any registry.
type anonymous struct{}

func (anonymous) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }
