package templates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
)

// BuildSpec names the template a build records.
type BuildSpec struct {
	// ID is the new record's id; "": a fresh one. E2B's build routes
	// choose it when the build is requested, so it can be answered then.
	ID string
	// Name is the template's name, "name:tag" naming the build's first
	// tag.
	Name string
	// Tags are the build's other tags (tags.go); with none and no tag in
	// Name, the build is the name's LatestTag.
	Tags []string
	// Source is recorded as the template's source; "": "build".
	Source string
	// Settings override, field by field where set, the settings the build
	// gives the record (builtSettings).
	Settings Settings
}

// Build runs build, which stores an image (untagged or not) in the image
// store, and records that image as tenantID's template spec.Name ("" a
// public one), under each of the build's tags. The settings come from what was built: the image config's
// user and working directory, the recipe's start and ready commands (the
// environment stays in the image config, which sandboxes start with).
// A template of the same name that tenantID already has is replaced once
// the build succeeded (a new record, with a new id: records are
// immutable); a failed build leaves it as it was. A lease keeps GC away
// from the image from the build until the record exists. Every entry
// point that builds (E2B's Template.build, the CLI) goes through here.
func (c *Catalog) Build(ctx context.Context, tenantID string, spec BuildSpec, run func(context.Context) (build.Result, error)) (Template, error) {
	if c.cfg.Images == nil {
		return Template{}, fmt.Errorf("this daemon has no image store: %w", errdefs.ErrFailedPrecondition)
	}
	name, tags, err := BuildTags(spec.Name, spec.Tags)
	if err != nil {
		return Template{}, err
	}
	if spec.ID != "" && !idRE.MatchString(spec.ID) {
		return Template{}, fmt.Errorf("template id %q: want 20 of [a-z0-9]: %w", spec.ID, errdefs.ErrInvalidArgument)
	}
	if spec.Source == "" {
		spec.Source = "build"
	}
	lease, err := c.cfg.Images.Lease(ctx)
	if err != nil {
		return Template{}, err
	}
	defer lease.Release()
	res, err := run(ctx)
	if err != nil {
		return Template{}, err
	}
	// One record per tag, the first with spec.ID; all are validated
	// before any old record goes.
	recs := make([]Template, len(tags))
	for i, tag := range tags {
		recs[i] = Template{TenantID: tenantID, Name: Tagged(name, tag), Image: res.Image.Digest.String(), Source: spec.Source,
			Settings: overlay(builtSettings(res), spec.Settings)}
		if i == 0 {
			recs[i].ID = spec.ID
		}
		if err := Prepare(&recs[i], time.Now()); err != nil {
			return Template{}, err
		}
	}
	var first Template
	for i, t := range recs {
		created, err := c.replace(ctx, t)
		if err != nil {
			return Template{}, err
		}
		if i == 0 {
			first = created
		}
	}
	return first, nil
}

// builtSettings are the settings a built image's template starts with.
func builtSettings(res build.Result) Settings {
	s := Settings{StartCmd: res.StartCmd}
	if s.StartCmd != "" {
		s.ReadyCmd = res.ReadyCmd
	}
	if cf := res.Image.Config; cf != nil {
		// USER user[:group]: the group is the user's own here.
		s.User, _, _ = strings.Cut(cf.Config.User, ":")
		if d := cf.Config.WorkingDir; d != "" && path.IsAbs(d) {
			s.Workdir = path.Clean(d)
		}
	}
	return s
}

// overlay returns s with the fields o sets.
func overlay(s, o Settings) Settings {
	if o.User != "" {
		s.User = o.User
	}
	if o.Workdir != "" {
		s.Workdir = o.Workdir
	}
	if o.StartCmd != "" {
		s.StartCmd, s.ReadyCmd = o.StartCmd, o.ReadyCmd
	} else if o.ReadyCmd != "" {
		s.ReadyCmd = o.ReadyCmd
	}
	if len(o.Env) > 0 {
		s.Env = o.Env
	}
	if len(o.Kernels) > 0 {
		s.Kernels = o.Kernels
	}
	if len(o.Prestart) > 0 {
		s.Prestart = o.Prestart
	}
	if o.Resources != (Resources{}) {
		s.Resources = o.Resources
	}
	if o.IdleSuspendSeconds > 0 {
		s.IdleSuspendSeconds = o.IdleSuspendSeconds
	}
	return s
}

// replace stores t, removing first the record of t's tenant that has its
// name. Two builds of one name that end together both succeed; the later
// one's record stays.
func (c *Catalog) replace(ctx context.Context, t Template) (Template, error) {
	for attempt := 0; ; attempt++ {
		old, err := c.cfg.Store.GetTemplate(ctx, t.TenantID, t.Name)
		switch {
		case err == nil && old.TenantID == t.TenantID && old.Name == t.Name:
			if err := c.cfg.Store.DeleteTemplate(ctx, t.TenantID, old.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return Template{}, err
			}
			c.forget(old.ID)
			c.log.Info("template replaced by a build", slog.String("template", old.ID), slog.String("name", old.Name), slog.String("tenant", t.TenantID))
		case err != nil && !errors.Is(err, errdefs.ErrNotFound):
			return Template{}, err
		}
		created, err := c.cfg.Store.CreateTemplate(ctx, t)
		if errors.Is(err, errdefs.ErrAlreadyExists) && attempt < 3 {
			continue // another build of the name recorded meanwhile
		}
		if err != nil {
			return Template{}, err
		}
		c.remember(created)
		c.log.Info("template built", slog.String("template", created.ID), slog.String("name", created.Name),
			slog.String("tenant", created.TenantID), slog.String("image", created.Image))
		return created, nil
	}
}

func (c *Catalog) forget(id string) {
	c.mu.Lock()
	delete(c.byID, id)
	c.mu.Unlock()
}

// Image returns the stored image of the template ref means for tenantID
// (a built-in, the tenant's, a public one): what a build's FROM resolves
// a template name to.
func (c *Catalog) Image(ctx context.Context, tenantID, ref string) (image.Image, error) {
	t, err := c.Resolve(ctx, tenantID, ref)
	if err != nil {
		return image.Image{}, err
	}
	if t.Image == "" {
		return image.Image{}, fmt.Errorf("template %q has no image: %w", ref, errdefs.ErrNotFound)
	}
	return c.cfg.Images.Get(ctx, t.Image)
}
