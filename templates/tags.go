package templates

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// Tags, as E2B's builds name them ("app:v1"): a tag names one build of a
// template name. Each tag is a record of its own, named NAME:TAG, except
// LatestTag, whose record is the bare NAME; so a tag resolves like any
// name (the tenant's own first, then a public one), and records stay
// immutable: moving a tag replaces its record.

// LatestTag is the tag a name without one means.
const LatestTag = "latest"

// maxTags bounds the tags of one build or one assignment.
const maxTags = 16

var tagRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

func checkTag(tag string) error {
	if !tagRE.MatchString(tag) {
		return fmt.Errorf("tag %q: want 1-128 of [a-z0-9._-], starting with a letter or digit: %w", tag, errdefs.ErrInvalidArgument)
	}
	return nil
}

// SplitTag splits a reference "name:tag" into its name and tag; without
// a tag, the tag is LatestTag.
func SplitTag(ref string) (name, tag string) {
	if n, t, ok := strings.Cut(ref, ":"); ok {
		return n, t
	}
	return ref, LatestTag
}

// Tagged is the record name of name's tag.
func Tagged(name, tag string) string {
	if tag == LatestTag || tag == "" {
		return name
	}
	return name + ":" + tag
}

// Canonical is ref with a ":latest" tag dropped: the name its record has.
func Canonical(ref string) string {
	if n, ok := strings.CutSuffix(ref, ":"+LatestTag); ok && !strings.Contains(n, ":") {
		return n
	}
	return ref
}

// BuildTags reads a build's name ("name" or "name:tag") and extra tags
// into the template name and the tags the build gets: the name's tag
// first, then the others, without repeats; none: LatestTag.
func BuildTags(ref string, extra []string) (name string, tags []string, err error) {
	name = ref
	if n, t, ok := strings.Cut(ref, ":"); ok {
		name, tags = n, []string{t}
	}
	for _, t := range extra {
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	if len(tags) == 0 {
		tags = []string{LatestTag}
	}
	if len(tags) > maxTags {
		return "", nil, fmt.Errorf("%d tags (at most %d): %w", len(tags), maxTags, errdefs.ErrInvalidArgument)
	}
	for _, t := range tags {
		if err := checkTag(t); err != nil {
			return "", nil, err
		}
	}
	if err := CheckName(name); err != nil {
		return "", nil, err
	}
	return name, tags, nil
}

// Tag gives tenantID's template target ("name:tag", "name" or an id;
// the tenant's own) the tags: each becomes a record of the same image and
// settings, replacing the record that tag had. It returns target's
// record.
func (c *Catalog) Tag(ctx context.Context, tenantID, target string, tags []string) (Template, error) {
	if c.cfg.Images == nil {
		return Template{}, fmt.Errorf("this daemon has no image store: %w", errdefs.ErrFailedPrecondition)
	}
	if len(tags) == 0 || len(tags) > maxTags {
		return Template{}, fmt.Errorf("%d tags (want 1 to %d): %w", len(tags), maxTags, errdefs.ErrInvalidArgument)
	}
	for _, t := range tags {
		if err := checkTag(t); err != nil {
			return Template{}, err
		}
	}
	// The lease keeps GC from the image between reading target and
	// recording the tags, should target be deleted meanwhile.
	lease, err := c.cfg.Images.Lease(ctx)
	if err != nil {
		return Template{}, err
	}
	defer lease.Release()
	src, err := c.Resolve(ctx, tenantID, target)
	if err == nil && (src.TenantID != tenantID || src.Image == "") {
		err = fmt.Errorf("template %q: %w", target, errdefs.ErrNotFound) // not the tenant's own
	}
	if err != nil {
		return Template{}, err
	}
	name, _ := SplitTag(src.Name)
	for _, tag := range tags {
		t := Template{TenantID: tenantID, Name: Tagged(name, tag), Image: src.Image, Source: src.Source, Settings: src.Settings.clone()}
		if err := Prepare(&t, time.Now()); err != nil {
			return Template{}, err
		}
		if _, err := c.replace(ctx, t); err != nil {
			return Template{}, err
		}
	}
	return src, nil
}

// Untag removes tenantID's tags of name: every one must exist (else
// not_found and none is removed).
func (c *Catalog) Untag(ctx context.Context, tenantID, name string, tags []string) error {
	name = Canonical(name)
	if strings.Contains(name, ":") {
		return fmt.Errorf("template name %q: name the template without a tag: %w", name, errdefs.ErrInvalidArgument)
	}
	if len(tags) == 0 || len(tags) > maxTags {
		return fmt.Errorf("%d tags (want 1 to %d): %w", len(tags), maxTags, errdefs.ErrInvalidArgument)
	}
	var ids []string
	for _, tag := range tags {
		if err := checkTag(tag); err != nil {
			return err
		}
		t, err := c.cfg.Store.GetTemplate(ctx, tenantID, Tagged(name, tag))
		if err == nil && t.TenantID != tenantID {
			err = errdefs.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("tag %s of template %s: %w", tag, name, err)
		}
		ids = append(ids, t.ID)
	}
	for _, id := range ids {
		if err := c.cfg.Store.DeleteTemplate(ctx, tenantID, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		c.forget(id)
	}
	return nil
}

// TagInfo is one tag of a template.
type TagInfo struct {
	Tag      string
	Template Template
}

// Tags lists the tags of the template ref means for tenantID (by name,
// with or without a tag, or by id): the records of its name with the
// same owner, sorted by tag.
func (c *Catalog) Tags(ctx context.Context, tenantID, ref string) ([]TagInfo, error) {
	t, err := c.Resolve(ctx, tenantID, ref)
	if err != nil {
		return nil, err
	}
	name, _ := SplitTag(t.Name)
	list, err := c.List(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	var out []TagInfo
	for _, o := range list {
		if n, tag := SplitTag(o.Name); n == name && o.TenantID == t.TenantID {
			out = append(out, TagInfo{Tag: tag, Template: o})
		}
	}
	slices.SortFunc(out, func(a, b TagInfo) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// Named resolves ref like Resolve, and also a bare name none of whose
// records has the latest tag: a template of that name exists once any of
// its tags was built (E2B's Template.exists asks by name). Then it is the
// name's newest record, the tenant's own before a public one.
func (c *Catalog) Named(ctx context.Context, tenantID, ref string) (Template, error) {
	t, err := c.Resolve(ctx, tenantID, ref)
	if err == nil || strings.Contains(ref, ":") || !errors.Is(err, errdefs.ErrNotFound) {
		return t, err
	}
	list, lerr := c.List(ctx, tenantID)
	if lerr != nil {
		return Template{}, lerr
	}
	var best Template
	found := false
	for _, o := range list {
		if n, _ := SplitTag(o.Name); n != ref {
			continue
		}
		own, bestOwn := !o.Public(), !best.Public()
		if !found || (own && !bestOwn) || (own == bestOwn && o.CreatedAt.After(best.CreatedAt)) {
			best, found = o, true
		}
	}
	if !found {
		return Template{}, err
	}
	return best, nil
}
