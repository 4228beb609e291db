package local

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/runtime"
)

// Template names the provider gives a meaning of its own.
const (
	// DefaultTemplate is what an empty contexts.Spec.Template means: the
	// image of that name in the store (the Debian base, cli wiring).
	DefaultTemplate = "default"
	// HostTemplate is the host's /usr, read-only, without /usr/local, under
	// a generated /etc: for hosts without an image. Only with
	// Config.HostTemplate; never what an empty template means.
	HostTemplate = "host"
)

// labelImage records, in a sandbox's bundle, the digest of the image its
// root is made of: what GC keeps while the sandbox exists.
const labelImage = "image"

// template is what a template name resolves to.
type template struct {
	root  *runtime.Root // nil: the host template
	env   map[string]string
	image v1.Hash
	lease *image.Lease // held until the sandbox's bundle names the image
}

func (t *template) release() { t.lease.Release() }

// resolve finds the template name ("" is DefaultTemplate). A name that is
// neither the host template (when allowed) nor an image in the store is
// not_found. Without a store the provider has one template, the host's,
// whatever the name (sandlot run, and the host template's tests).
func (p *Provider) resolve(ctx context.Context, name string) (*template, error) {
	if p.images == nil {
		return &template{}, nil
	}
	if name == "" {
		name = DefaultTemplate
	}
	if name == HostTemplate {
		if !p.hostTemplate {
			return nil, fmt.Errorf("template %q is not enabled on this host: %w", name, errdefs.ErrNotFound)
		}
		return &template{}, nil
	}
	// The lease keeps GC away from the image between this lookup and the
	// bundle that names it (GC asks the runtime for live images only once
	// it holds the store).
	lease, err := p.images.Lease(ctx)
	if err != nil {
		return nil, err
	}
	img, err := p.images.Get(ctx, name)
	if err != nil {
		lease.Release()
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument) {
			if p.missing != nil {
				if err := p.missing(name); err != nil {
					return nil, err
				}
			}
			return nil, fmt.Errorf("template %q: %w", name, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("template %q: %w", name, err)
	}
	t := &template{root: &runtime.Root{Layers: img.LowerDirs()}, image: img.Digest, lease: lease}
	if img.Config != nil {
		t.env = imageEnv(img.Config.Config.Env)
	}
	return t, nil
}

// imageEnv is an image config's environment ("K=V" entries) as a map.
func imageEnv(list []string) map[string]string {
	out := make(map[string]string, len(list))
	for _, kv := range list {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// LiveImages returns the images that this state dir's sandboxes, running
// or not, have their roots made of.
func (p *Provider) LiveImages(ctx context.Context) ([]v1.Hash, error) {
	ids, err := p.rt.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []v1.Hash
	for _, id := range ids {
		st, err := p.rt.State(ctx, id)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		if d := st.Labels[labelImage]; d != "" {
			h, err := v1.NewHash(d)
			if err != nil {
				return nil, fmt.Errorf("sandbox %s: image label: %w", id, err)
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// GC removes the store's layers and blobs that no named image and no
// sandbox of this provider uses.
func (p *Provider) GC(ctx context.Context) (image.GCStats, error) {
	if p.images == nil {
		return image.GCStats{}, fmt.Errorf("no image store: %w", errdefs.ErrFailedPrecondition)
	}
	return p.images.GCFunc(ctx, p.LiveImages)
}
