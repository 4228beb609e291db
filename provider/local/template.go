package local

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/templates"
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
	name  string
	root  *runtime.Root // nil: the host template
	env   map[string]string
	image v1.Hash
	lease *image.Lease // held until the sandbox's bundle names the image
	// settings of a template record (Config.Templates); zero for a
	// built-in or a bare image name.
	settings templates.Settings
	public   bool // the operator's: its resources may exceed the defaults
}

// Templates is what the provider asks about a template id
// (templates.Catalog implements it).
type Templates interface {
	ByID(ctx context.Context, id string) (templates.Template, error)
}

func (t *template) release() { t.lease.Release() }

// resolve finds the template name ("" is DefaultTemplate). With
// Config.Templates a name is a record's id or a built-in's (whose image
// the catalog pins), without it an image name in the store (tests); any
// other name is not_found. Without a store the provider has one template,
// the host's, whatever the name (sandlot run, and the host template's
// tests).
func (p *Provider) resolve(ctx context.Context, name string) (*template, error) {
	if p.images == nil {
		return &template{name: HostTemplate, public: true}, nil
	}
	if name == "" {
		name = DefaultTemplate
	}
	if name == HostTemplate {
		if !p.hostTemplate {
			return nil, fmt.Errorf("template %q is not enabled on this host: %w", name, errdefs.ErrNotFound)
		}
		return &template{name: name, public: true}, nil
	}
	ref, display := name, name
	var rec *templates.Template
	if p.templates != nil {
		// With a catalog, a template is a record or a built-in, and its
		// image is a digest: the record's, or the one the daemon pinned
		// for the built-in. Never a name in the store, which every
		// writer of the store reaches.
		t, err := p.templates.ByID(ctx, name)
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			return nil, fmt.Errorf("template %q: %w", name, errdefs.ErrNotFound)
		case err != nil:
			return nil, err
		case t.Image == "":
			// A built-in without its image yet: being built, or missing.
			return nil, p.notBuilt(name)
		}
		rec, display, ref = &t, t.Name, t.Image
	}
	// The lease keeps GC away from the image between this lookup and the
	// bundle that names it (GC asks the runtime for live images only once
	// it holds the store).
	lease, err := p.images.Lease(ctx)
	if err != nil {
		return nil, err
	}
	img, err := p.images.Get(ctx, ref)
	if err != nil {
		lease.Release()
		if rec != nil && ref != name {
			return nil, fmt.Errorf("template %q: image %s: %w", display, ref, err)
		}
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument) {
			return nil, p.notBuilt(name)
		}
		return nil, fmt.Errorf("template %q: %w", name, err)
	}
	t := &template{name: display, root: &runtime.Root{Layers: img.LowerDirs(), Sudo: p.setID() && hasSudo(img.LowerDirs())}, image: img.Digest, lease: lease, public: true}
	if img.Config != nil {
		t.env = imageEnv(img.Config.Config.Env)
	}
	if rec != nil {
		t.settings, t.public = rec.Settings, rec.Public()
	}
	return t, nil
}

// notBuilt is the error for a template whose image the store lacks:
// Config.Missing's answer (a built-in being built, or why it failed),
// else not_found.
func (p *Provider) notBuilt(name string) error {
	if p.missing != nil {
		if err := p.missing(name); err != nil {
			return err
		}
	}
	return fmt.Errorf("template %q: %w", name, errdefs.ErrNotFound)
}

// hasSudo reports whether an image has sudo (a regular file at
// oci.SudoPath): its sandboxes get a working sudo (runtime.Root.Sudo), as
// E2B's do. What sudo allows is the image's /etc/sudoers; the default
// image lets its user do anything without a password (image/debian).
func hasSudo(layers []string) bool {
	fi, _, err := image.Stack(layers).Lstat(oci.SudoPath)
	return err == nil && fi.Mode().IsRegular()
}

// setID reports whether the runtime honours set-id bits, which sudo
// needs: gVisor does not implement them (its issue 1342), so under runsc
// no_new_privs stays set, sudo says so, and the user's file calls keep
// the user's ids.
func (p *Provider) setID() bool { return p.rt.Name() != oci.KindRunsc }

// userArg is the agent's --user for t's user: "" for the sandbox user
// (""/"user"/"1000"), else NAME:UID:GID with the ids the image's
// /etc/passwd and /etc/group give it (root included). The host template
// has no other user; a user the image lacks is refused clearly.
func (t *template) userArg() (string, error) {
	u := t.settings.User
	switch u {
	case "", "user", "1000":
		return "", nil
	}
	if t.root == nil {
		return "", fmt.Errorf("template %q runs as user %q, but the host template runs a sandbox's commands as its user (uid 1000) only: %w",
			t.name, u, errdefs.ErrFailedPrecondition)
	}
	uid, gid, err := build.LookupUser(t.root.Layers, u)
	if err != nil {
		return "", fmt.Errorf("template %q runs as user %q: %v: %w", t.name, u, err, errdefs.ErrFailedPrecondition)
	}
	return fmt.Sprintf("%s:%d:%d", u, uid, gid), nil
}

// prestart is the kernels a sandbox of t starts at boot: the daemon's
// and the request's that t offers, then t's own.
func (t *template) prestart(base, extra []string) []string {
	var out []string
	for _, k := range mergePrestart(base, extra) {
		if t.settings.Offers(k) {
			out = append(out, k)
		}
	}
	return mergePrestart(out, t.settings.Prestart)
}

// limits applies t's resource defaults to l, the limits of the request
// (req: the fields it set itself). A tenant's template may only lower
// them; a public one (the operator's) sets them where the request did not.
func (t *template) limits(l runtime.Limits, req contexts.Limits) runtime.Limits {
	r := t.settings.Resources
	apply := func(have *int64, want, asked int64) {
		switch {
		case want <= 0:
		case !t.public:
			*have = min(*have, want)
		case asked <= 0:
			*have = want
		}
	}
	apply(&l.MemoryBytes, r.MemoryBytes, req.MemoryBytes)
	apply(&l.PIDs, r.PIDs, req.PIDs)
	apply(&l.DiskBytes, r.DiskBytes, req.DiskBytes)
	switch {
	case r.CPUs <= 0:
	case !t.public:
		l.CPUs = min(l.CPUs, r.CPUs)
	case req.CPUs <= 0:
		l.CPUs = r.CPUs
	}
	return l
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

// startCmd starts a template's start command beside a new sandbox, as
// E2B's start command runs: through /bin/sh -c, output to
// /tmp/.sandlot-start.log, in a call that lasts as long as the sandbox's
// connection (the agent ends a process with its call, so a daemon that
// reattaches after a restart does not restart it).
func (p *Provider) startCmd(c *agent.Client, tmpl string, cmd string) {
	go func() {
		res, err := c.Exec(context.Background(), agent.ExecParams{
			Argv:      []string{"/bin/sh", "-c", `exec /bin/sh -c "$0" </dev/null >/tmp/.sandlot-start.log 2>&1`, cmd},
			TimeoutMs: -1,
			Tag:       "start",
		}, nil)
		switch {
		case err != nil:
			p.log.Debug("template start command ended", logkey.Sandbox, c.ID(), logkey.Template, tmpl, logkey.Err, err)
		case res.ExitCode != 0:
			p.log.Info("template start command failed", logkey.Sandbox, c.ID(), logkey.Template, tmpl, "exit", res.ExitCode)
		}
	}()
}

// waitReady runs a template's ready command until it exits 0, for as long
// as the create may take (ctx). A start command that never gets ready does
// not fail the create: the sandbox is handed out and a warning logged,
// since its start command's log (/tmp/.sandlot-start.log) is what a user
// needs to see why.
func (p *Provider) waitReady(ctx context.Context, c *agent.Client, tmpl, cmd string) {
	for {
		res, err := c.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/sh", "-c", cmd}, TimeoutMs: 10_000, Tag: "ready"}, nil)
		if err == nil && res.ExitCode == 0 {
			return
		}
		select {
		case <-ctx.Done():
			p.log.Warn("template start command not ready when the sandbox was handed out", logkey.Sandbox, c.ID(), logkey.Template, tmpl)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
