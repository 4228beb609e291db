package templates

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
)

// A snapshot is a tenant's template made of a sandbox's filesystem: the
// image of the template the sandbox ran, plus one layer, the sandbox's
// writable layer as captured (the provider's Capture). Its template record
// is an ordinary one (resolved, listed, started from, deleted like any);
// the Snapshot record beside it says where it came from, and goes with the
// template (a delete of the template deletes it). docs/state-snapshots.md.

// Snapshot is the record of a template made from a sandbox.
type Snapshot struct {
	// ID is the template's id.
	ID string `json:"id"`
	// TenantID owns it (snapshots are never public).
	TenantID string `json:"tenantId"`
	// ContextID is the context whose sandbox it was taken from.
	ContextID string `json:"contextId"`
	// Template is the id of the template that sandbox ran.
	Template string `json:"template"`
	// Bytes is the size of the captured layer's tarball.
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"createdAt"`
	// Fork marks the template a fork made for its contexts to start from
	// (SnapshotSpec.Fork): the cleanup pass deletes it once no context
	// runs on it (contexts/forkdrop.go). A snapshot the tenant took is
	// never marked, whatever its name.
	Fork bool `json:"-"`
}

// SnapshotStore keeps snapshot records. Every backend implements it the
// same way (store/storetest); a tenant-scoped ctx reads and writes only
// that tenant's (row-level security on Postgres).
type SnapshotStore interface {
	// CreateSnapshot records s; its template (s.ID) must exist and be
	// s.TenantID's (else not_found). CreatedAt is set when zero.
	CreateSnapshot(ctx context.Context, s Snapshot) error
	// ListSnapshots returns tenantID's snapshots whose template still
	// exists, newest first; contextID, when not "", only those taken from
	// that context.
	ListSnapshots(ctx context.Context, tenantID, contextID string) ([]Snapshot, error)
	// ForkSnapshots returns at most limit snapshots marked Fork, created
	// before before, oldest first: every tenant's on a system ctx, only
	// the ctx's tenant's on a tenant-scoped one.
	ForkSnapshots(ctx context.Context, before time.Time, limit int) ([]Snapshot, error)
}

// DefaultMaxSnapshots is Config.MaxSnapshots' zero value: how many
// snapshots a tenant may keep.
const DefaultMaxSnapshots = 100

// DefaultSnapshotBytes is Config.SnapshotBytes' zero value: the file
// bytes of a captured writable layer (apparent sizes: a sparse file counts
// whole).
const DefaultSnapshotBytes = 4 << 30

// SnapshotSpec asks for a snapshot of tenantID's context ContextID, whose
// sandbox runs template Template.
type SnapshotSpec struct {
	ContextID string
	Template  string
	// Name is the new template's name; "": "snapshot-" and random letters.
	Name string
	// Fork marks the snapshot as a fork's own (Snapshot.Fork); only the
	// manager's fork asks for it (TakeForkSnapshot), never an edge.
	Fork bool
}

// Capture writes a sandbox's writable layer as an uncompressed layer
// tarball of at most max file bytes (the provider's Capture through the
// manager).
type Capture func(ctx context.Context, w io.Writer, max int64) error

// Snapshot makes a template of tenantID's from spec's sandbox: the source
// template's image plus the layer capture writes, with the source's
// settings. The tenant's snapshots are bounded by Config.MaxSnapshots
// (resource_exhausted). The image is stored unnamed under a lease until
// its record exists, like a pull's.
func (c *Catalog) Snapshot(ctx context.Context, tenantID string, spec SnapshotSpec, capture Capture) (Template, Snapshot, error) {
	if c.cfg.Snapshots == nil || c.cfg.Images == nil {
		return Template{}, Snapshot{}, fmt.Errorf("this daemon keeps no snapshots: %w", errdefs.ErrFailedPrecondition)
	}
	if tenantID == "" {
		return Template{}, Snapshot{}, fmt.Errorf("a snapshot belongs to a tenant: %w", errdefs.ErrInvalidArgument)
	}
	if spec.Name == "" {
		spec.Name = "snapshot-" + rand.Text()[:12]
		spec.Name = lowerName(spec.Name)
	}
	if err := c.check(ctx, tenantID, Spec{Name: spec.Name}); err != nil {
		return Template{}, Snapshot{}, err
	}
	have, err := c.cfg.Snapshots.ListSnapshots(ctx, tenantID, "")
	if err != nil {
		return Template{}, Snapshot{}, err
	}
	if max := c.maxSnapshots(); len(have) >= max {
		return Template{}, Snapshot{}, errdefs.Sentence(errdefs.ErrResourceExhausted, "tenant %s keeps %d snapshots, the most it may; delete one first", tenantID, max)
	}
	src, digest, bytes, release, err := c.captureImage(ctx, spec.Template, "sandlot snapshot of context "+spec.ContextID, capture)
	if err != nil {
		return Template{}, Snapshot{}, fmt.Errorf("snapshot of context %s: %w", spec.ContextID, err)
	}
	defer release()
	t, err := c.cfg.Store.CreateTemplate(ctx, Template{TenantID: tenantID, Name: spec.Name, Image: digest,
		Source: "snapshot", Settings: src.Settings.clone()})
	if err != nil {
		return Template{}, Snapshot{}, err
	}
	s := Snapshot{ID: t.ID, TenantID: tenantID, ContextID: spec.ContextID, Template: src.ID, Bytes: bytes, CreatedAt: t.CreatedAt, Fork: spec.Fork}
	if err := c.cfg.Snapshots.CreateSnapshot(ctx, s); err != nil {
		// The template without its record would be a snapshot no list
		// shows: take it back.
		derr := c.cfg.Store.DeleteTemplate(context.WithoutCancel(ctx), tenantID, t.ID)
		return Template{}, Snapshot{}, errors.Join(err, derr)
	}
	c.remember(t)
	c.log.Info("snapshot created", slog.String("template", t.ID), slog.String("name", t.Name), slog.String("tenant", tenantID),
		slog.String("context", spec.ContextID), slog.Int64("bytes", bytes))
	return t, s, nil
}

// captureImage stores the image of template srcID plus the layer capture
// writes, unnamed, and returns the source template, the new image's
// digest and the layer's bytes. The image store's lease is held until
// release, so that the GC leaves the image alone until a template record
// names it.
func (c *Catalog) captureImage(ctx context.Context, srcID, createdBy string, capture Capture) (Template, string, int64, func(), error) {
	src, err := c.ByID(ctx, srcID)
	if err != nil {
		return Template{}, "", 0, nil, err
	}
	if src.Image == "" {
		return Template{}, "", 0, nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "template %q has no image: a sandbox of it cannot be captured", src.Name)
	}
	base, err := v1.NewHash(src.Image)
	if err != nil {
		return Template{}, "", 0, nil, fmt.Errorf("template %s: image %q: %w", src.ID, src.Image, err)
	}
	lease, err := c.cfg.Images.Lease(ctx)
	if err != nil {
		return Template{}, "", 0, nil, err
	}
	fail := func(err error) (Template, string, int64, func(), error) {
		lease.Release()
		return Template{}, "", 0, nil, err
	}
	baseImg, err := c.cfg.Images.V1(ctx, base)
	if err != nil {
		return fail(fmt.Errorf("template %s: %w", src.ID, err))
	}
	var bytes int64
	l, err := c.cfg.Images.NewTarLayer(ctx, func(w io.Writer) error {
		cw := &counter{w: w}
		err := capture(ctx, cw, c.snapshotBytes())
		bytes = cw.n
		return err
	})
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	img, err := mutate.Append(baseImg, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: time.Now().UTC()}, CreatedBy: createdBy}})
	if err != nil {
		return fail(err)
	}
	stored, err := c.cfg.Images.Put(ctx, img, image.PutOptions{})
	if err != nil {
		return fail(err)
	}
	return src, stored.Digest.String(), bytes, lease.Release, nil
}

// Snapshots lists tenantID's snapshots (contextID "": all) with their
// templates, newest first.
func (c *Catalog) Snapshots(ctx context.Context, tenantID, contextID string) ([]Template, []Snapshot, error) {
	if c.cfg.Snapshots == nil {
		return nil, nil, nil
	}
	ss, err := c.cfg.Snapshots.ListSnapshots(ctx, tenantID, contextID)
	if err != nil {
		return nil, nil, err
	}
	ts := make([]Template, 0, len(ss))
	out := ss[:0]
	for _, s := range ss {
		t, err := c.lookupID(ctx, s.ID, false)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, nil, err
		}
		ts = append(ts, t)
		out = append(out, s)
	}
	return ts, out, nil
}

func (c *Catalog) maxSnapshots() int {
	if c.cfg.MaxSnapshots > 0 {
		return c.cfg.MaxSnapshots
	}
	return DefaultMaxSnapshots
}

func (c *Catalog) snapshotBytes() int64 {
	if c.cfg.SnapshotBytes > 0 {
		return c.cfg.SnapshotBytes
	}
	return DefaultSnapshotBytes
}

// lowerName maps rand.Text's alphabet (upper case and digits) into a
// template name's.
func lowerName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return string(b)
}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// SourceSuspend is the Source of a template that holds a context suspended
// to disk (contexts.Manager.Suspend): the tenant's, named "suspended-" and
// random letters, left out of List and of the snapshots, deleted when the
// context wakes or ends.
const SourceSuspend = "suspend"

// KeepSuspended implements contexts.SuspendImages: the image of template
// plus the layer capture writes, as a template of tenantID's with the
// source's settings. It is not a snapshot (no record, not counted in
// MaxSnapshots): the context's record names it, and the context holds
// one at most.
func (c *Catalog) KeepSuspended(ctx context.Context, tenantID, contextID, template string, capture func(context.Context, io.Writer, int64) error) (string, int64, error) {
	if c.cfg.Images == nil {
		return "", 0, fmt.Errorf("this daemon keeps no images: %w", errdefs.ErrFailedPrecondition)
	}
	if tenantID == "" {
		return "", 0, fmt.Errorf("a suspended context belongs to a tenant: %w", errdefs.ErrInvalidArgument)
	}
	src, digest, bytes, release, err := c.captureImage(ctx, template, "sandlot suspend of context "+contextID, capture)
	if err != nil {
		return "", 0, err
	}
	defer release()
	t, err := c.cfg.Store.CreateTemplate(ctx, Template{TenantID: tenantID, Name: lowerName("suspended-" + rand.Text()[:16]), Image: digest,
		Source: SourceSuspend, Settings: src.Settings.clone()})
	if err != nil {
		return "", 0, err
	}
	c.remember(t)
	return t.ID, bytes, nil
}

// DropSuspended implements contexts.SuspendImages: it deletes tenantID's
// suspend template id, and leaves any other template alone (another
// tenant's, a built-in, a snapshot, an imported one).
func (c *Catalog) DropSuspended(ctx context.Context, tenantID, id string) error {
	if tenantID == "" || id == "" || slices.Contains(Reserved, id) {
		return nil
	}
	t, err := c.lookupID(ctx, id, false)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if t.TenantID != tenantID || t.Source != SourceSuspend {
		return nil
	}
	if err := c.cfg.Store.DeleteTemplate(ctx, tenantID, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	c.mu.Lock()
	delete(c.byID, id)
	c.mu.Unlock()
	return nil
}

// MaxSnapshots is how many snapshots a tenant may keep
// (Config.MaxSnapshots, or DefaultMaxSnapshots); 0 when the catalog keeps
// none (no snapshot store or image store).
func (c *Catalog) MaxSnapshots() int {
	if c.cfg.Snapshots == nil || c.cfg.Images == nil {
		return 0
	}
	return c.maxSnapshots()
}

var _ contexts.Snapshots = (*Catalog)(nil)

// TakeSnapshot implements contexts.Snapshots (a fork's template): the
// snapshot Snapshot makes, named name, described as the manager needs it.
func (c *Catalog) TakeSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(context.Context, io.Writer, int64) error) (contexts.SnapshotInfo, error) {
	t, s, err := c.Snapshot(ctx, tenantID, SnapshotSpec{ContextID: contextID, Template: template, Name: name}, capture)
	if err != nil {
		return contexts.SnapshotInfo{}, err
	}
	return contexts.SnapshotInfo{ID: t.ID, Name: t.Name, ContextID: s.ContextID, Template: s.Template, Bytes: s.Bytes, CreatedAt: s.CreatedAt}, nil
}

var _ contexts.ForkMarks = (*Catalog)(nil)

// TakeForkSnapshot implements contexts.ForkMarks: TakeSnapshot with the
// snapshot's row marked as the fork's own (Snapshot.Fork).
func (c *Catalog) TakeForkSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(context.Context, io.Writer, int64) error) (contexts.SnapshotInfo, error) {
	t, s, err := c.Snapshot(ctx, tenantID, SnapshotSpec{ContextID: contextID, Template: template, Name: name, Fork: true}, capture)
	if err != nil {
		return contexts.SnapshotInfo{}, err
	}
	return contexts.SnapshotInfo{ID: t.ID, Name: t.Name, ContextID: s.ContextID, Template: s.Template, Bytes: s.Bytes, CreatedAt: s.CreatedAt}, nil
}

// ForkTemplates implements contexts.ForkMarks from the snapshot store's
// marked rows; a catalog without one marks none.
func (c *Catalog) ForkTemplates(ctx context.Context, before time.Time, limit int) ([]contexts.ForkTemplate, error) {
	if c.cfg.Snapshots == nil {
		return nil, nil
	}
	ss, err := c.cfg.Snapshots.ForkSnapshots(ctx, before, limit)
	if err != nil {
		return nil, err
	}
	out := make([]contexts.ForkTemplate, len(ss))
	for i, s := range ss {
		out[i] = contexts.ForkTemplate{TenantID: s.TenantID, ID: s.ID, CreatedAt: s.CreatedAt}
	}
	return out, nil
}

// IsForkTemplate implements contexts.ForkMarks: whether tenantID's
// template id is a snapshot marked as a fork's own. It reads the tenant's
// snapshots (at most Config.MaxSnapshots rows): the manager asks at every
// end and wake of a context, whatever template that ran. A snapshot's id
// is its stored template's, which the store gives (NewID; Prepare refuses
// any other shape) and no tenant chooses: an id of another shape, such as
// a built-in template's, is no snapshot's, and is answered without a read.
func (c *Catalog) IsForkTemplate(ctx context.Context, tenantID, id string) (bool, error) {
	if c.cfg.Snapshots == nil || !idRE.MatchString(id) {
		return false, nil
	}
	ss, err := c.cfg.Snapshots.ListSnapshots(ctx, tenantID, "")
	if err != nil {
		return false, err
	}
	for _, s := range ss {
		if s.ID == id {
			return s.Fork, nil
		}
	}
	return false, nil
}

// DeleteSnapshot implements contexts.Snapshots: Delete of tenantID's
// template id.
func (c *Catalog) DeleteSnapshot(ctx context.Context, tenantID, id string) error {
	return c.Delete(ctx, tenantID, id)
}
