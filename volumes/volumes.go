// Package volumes owns sandlot's volumes: a tenant's named, size-bounded
// file systems that outlive sandboxes and daemon restarts, mounted
// read-write or read-only into a sandbox at a path.
//
// This file is the record, the mount a sandbox asks for, the checks on
// both, and the Store the persistence backends implement; host.go keeps
// each volume's bytes on the host (an ext4 image per volume, attached to
// a loop device only while a sandbox mounts it); service.go puts the two
// together with the quotas. docs/volumes.md records the design and
// docs/security-walls-daemon.md its walls.
package volumes

import (
	"context"
	"crypto/rand"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// Volume is one volume record.
type Volume struct {
	// ID is unique across tenants: "vol" and 20 lowercase letters and
	// digits, made by the daemon (it names the volume's file on the host).
	ID string `json:"id"`
	// TenantID owns the volume; no other tenant sees it.
	TenantID string `json:"tenantId"`
	// Name is unique per tenant: what sandboxes mount it by (E2B's
	// volumeMounts name volumes).
	Name string `json:"name"`
	// SizeBytes is the volume's size: what a sandbox can write to it
	// before ENOSPC, and what it counts against the tenant's quota.
	SizeBytes int64     `json:"sizeBytes"`
	CreatedAt time.Time `json:"createdAt"`
}

// Mount is a volume a sandbox mounts: by id (the edges resolve names), at
// Path inside the sandbox.
type Mount struct {
	VolumeID string `json:"volumeId"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Store persists volume records and which contexts mount them. The
// context stores implement it (store/memory, store/sqlite,
// store/postgres). A tenant-scoped ctx sees its own tenant's rows only:
// another tenant's volume is ErrNotFound, never another answer.
type Store interface {
	// CreateVolume stores v (Prepare fills its ID and CreatedAt);
	// ErrAlreadyExists when its tenant has the name, ErrNotFound when
	// the tenant does not exist.
	CreateVolume(ctx context.Context, v Volume) (Volume, error)
	// GetVolume finds tenantID's volume by name, else by id.
	GetVolume(ctx context.Context, tenantID, ref string) (Volume, error)
	// ListVolumes returns tenantID's volumes sorted by name; tenantID ""
	// returns every tenant's (an unscoped ctx only: the daemon's sweep of
	// files whose record is gone).
	ListVolumes(ctx context.Context, tenantID string) ([]Volume, error)
	// AttachVolume records that context contextID of tenantID mounts
	// volume m.VolumeID at m.Path; ErrNotFound when tenantID has no such
	// volume. A second attachment of one volume to one context keeps the
	// first.
	AttachVolume(ctx context.Context, tenantID, contextID string, m Mount) error
	// ContextVolumes returns the mounts recorded for tenantID's context
	// contextID, by path (none: empty).
	ContextVolumes(ctx context.Context, tenantID, contextID string) ([]Mount, error)
	// VolumeUsers returns the contexts not yet terminated that mount
	// tenantID's volume id (ErrNotFound when there is none).
	VolumeUsers(ctx context.Context, tenantID, id string) ([]string, error)
	// DeleteVolume removes tenantID's volume id and its attachments, in
	// one statement that finds no context not yet terminated mounting it:
	// else ErrFailedPrecondition (InUse). ErrNotFound when tenantID has no
	// such volume.
	DeleteVolume(ctx context.Context, tenantID, id string) error
}

// InUse is DeleteVolume's error for a volume a live context mounts.
func InUse(id string) error {
	return errdefs.Sentence(errdefs.ErrFailedPrecondition, "volume %s is mounted by a running sandbox; kill the sandbox first", id)
}

// NotFound is the error for a volume ref that names none of the
// tenant's volumes, whether it names another tenant's or nothing.
func NotFound(ref string) error {
	return errdefs.Sentence(errdefs.ErrNotFound, "volume %q not found", clip(ref))
}

// clip bounds what an error quotes of a caller's string.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// nameRE is what a name may be: E2B's template alias shape, nothing that
// reads as a path (no "/", no "..", no NUL) and at most 63 bytes.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// idRE is the shape of a generated id.
var idRE = regexp.MustCompile(`^vol[a-z0-9]{20}$`)

// CheckName rejects a name that is not 1-63 of [a-z0-9_-] starting with
// a letter or digit.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return errdefs.Sentence(errdefs.ErrInvalidArgument, "volume name %q: want 1-63 of a-z, 0-9, _ and -, starting with a letter or digit", clip(name))
	}
	return nil
}

// ValidID reports whether id has the shape of a volume id. Only such ids
// ever name a file on the host.
func ValidID(id string) bool { return idRE.MatchString(id) }

// NewID returns a fresh volume id.
func NewID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "vol" + string(b)
}

// Prepare validates v for CreateVolume and fills its ID (when empty) and
// CreatedAt (when zero) from now.
func Prepare(v *Volume, now time.Time) error {
	if v.TenantID == "" {
		return fmt.Errorf("volume %s: no tenant: %w", v.Name, errdefs.ErrInvalidArgument)
	}
	if err := CheckName(v.Name); err != nil {
		return err
	}
	if v.ID == "" {
		v.ID = NewID()
	} else if !ValidID(v.ID) {
		return fmt.Errorf("volume id %q: want vol and 20 of [a-z0-9]: %w", clip(v.ID), errdefs.ErrInvalidArgument)
	}
	if v.SizeBytes <= 0 {
		return fmt.Errorf("volume %s: size %d: %w", v.Name, v.SizeBytes, errdefs.ErrInvalidArgument)
	}
	if v.CreatedAt.IsZero() {
		v.CreatedAt = now
	}
	return nil
}

// reserved are the sandbox paths a volume may not cover, be under or be
// an ancestor of: the kernel's file systems, the agent's binary and
// channel, the system the image runs on. "/" is the ancestor of all.
var reserved = []string{
	"/proc", "/sys", "/dev", "/run", "/etc", "/opt/sandlot",
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/var/run",
}

// MaxPathBytes bounds a mount path.
const MaxPathBytes = 1024

// CheckPath rejects a mount path that is not absolute and clean ("/..",
// "/a/../b", "//a", a trailing "/"), holds a NUL or a control character,
// is longer than MaxPathBytes or has a component past 255 bytes, or is,
// lies under, or is an ancestor of a reserved path (reserved above).
func CheckPath(p string) error {
	bad := func(why string) error {
		return errdefs.Sentence(errdefs.ErrInvalidArgument, "volume mount path %q: %s", clip(p), why)
	}
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxPathBytes:
		return bad(fmt.Sprintf("longer than %d bytes", MaxPathBytes))
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return bad("holds a control character")
	case !strings.HasPrefix(p, "/"):
		return bad("not absolute")
	case path.Clean(p) != p:
		return bad("not clean (no ., .., // or trailing /)")
	case p == "/":
		return bad("the sandbox's root")
	}
	for _, c := range strings.Split(p[1:], "/") {
		if len(c) > 255 {
			return bad("a component is longer than 255 bytes")
		}
	}
	for _, r := range reserved {
		if p == r || strings.HasPrefix(p, r+"/") || strings.HasPrefix(r, p+"/") {
			return bad("covers " + r + ", which the sandbox's system needs")
		}
	}
	return nil
}

// CheckMounts checks each mount's path and that no two paths are the same
// or nest.
func CheckMounts(ms []Mount) error {
	for i, m := range ms {
		if err := CheckPath(m.Path); err != nil {
			return err
		}
		for _, o := range ms[:i] {
			if o.Path == m.Path || strings.HasPrefix(o.Path, m.Path+"/") || strings.HasPrefix(m.Path, o.Path+"/") {
				return errdefs.Sentence(errdefs.ErrInvalidArgument, "volume mount paths %q and %q overlap", o.Path, m.Path)
			}
		}
	}
	return nil
}
