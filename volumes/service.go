package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Config bounds volumes. Zero values mean the defaults named.
type Config struct {
	// DefaultSizeBytes is a new volume's size when the caller names none
	// (E2B's Volume.create names none): 1 GiB.
	DefaultSizeBytes int64
	// MaxSizeBytes bounds one volume: 16 GiB.
	MaxSizeBytes int64
	// MaxPerTenant bounds how many volumes a tenant has: 20.
	MaxPerTenant int
	// MaxBytesPerTenant bounds the sum of a tenant's volumes' sizes:
	// 32 GiB.
	MaxBytesPerTenant int64
	// Logger; nil discards.
	Logger *slog.Logger
}

// The defaults of Config's zero values.
const (
	DefaultSizeBytes         = 1 << 30
	DefaultMaxSizeBytes      = 16 << 30
	DefaultMaxPerTenant      = 20
	DefaultMaxBytesPerTenant = 32 << 30
)

func (c Config) withDefaults() Config {
	if c.DefaultSizeBytes <= 0 {
		c.DefaultSizeBytes = DefaultSizeBytes
	}
	if c.MaxSizeBytes <= 0 {
		c.MaxSizeBytes = DefaultMaxSizeBytes
	}
	if c.MaxPerTenant <= 0 {
		c.MaxPerTenant = DefaultMaxPerTenant
	}
	if c.MaxBytesPerTenant <= 0 {
		c.MaxBytesPerTenant = DefaultMaxBytesPerTenant
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service is the daemon's one owner of volumes: records in the store,
// files on the host, the quotas, and the mounts sandboxes ask for.
type Service struct {
	store Store
	host  *Host
	cfg   Config

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per volume id and per tenant ("t:"+id); under mu, never removed
}

// NewService returns the service over store and host.
func NewService(store Store, host *Host, cfg Config) *Service {
	return &Service{store: store, host: host, cfg: cfg.withDefaults(), locks: map[string]*sync.Mutex{}}
}

// lock serializes the work on one key (a volume's create, open, delete;
// a tenant's quota check and create) in this process.
func (s *Service) lock(key string) func() {
	s.mu.Lock()
	l, ok := s.locks[key]
	if !ok {
		l = &sync.Mutex{}
		s.locks[key] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Limits returns the bounds in force.
func (s *Service) Limits() Config { return s.cfg }

// Create makes tenantID's volume name of size bytes (0: the default
// size): the file first, then the record, so a record never names a
// missing file. Past the tenant's quotas it is resource_exhausted.
func (s *Service) Create(ctx context.Context, tenantID, name string, size int64) (Volume, error) {
	if err := CheckName(name); err != nil {
		return Volume{}, err
	}
	if size == 0 {
		size = s.cfg.DefaultSizeBytes
	}
	if size < MinSizeBytes || size > s.cfg.MaxSizeBytes {
		return Volume{}, errdefs.Sentence(errdefs.ErrInvalidArgument, "volume size %d bytes: want %d to %d", size, MinSizeBytes, s.cfg.MaxSizeBytes)
	}
	defer s.lock("t:" + tenantID)()
	have, err := s.store.ListVolumes(ctx, tenantID)
	if err != nil {
		return Volume{}, err
	}
	var sum int64
	for _, v := range have {
		if v.Name == name {
			return Volume{}, errdefs.Sentence(errdefs.ErrAlreadyExists, "volume %q exists", name)
		}
		sum += v.SizeBytes
	}
	if len(have) >= s.cfg.MaxPerTenant {
		return Volume{}, errdefs.Sentence(errdefs.ErrResourceExhausted, "tenant has %d volumes, the most it may have", len(have))
	}
	if sum+size > s.cfg.MaxBytesPerTenant {
		return Volume{}, errdefs.Sentence(errdefs.ErrResourceExhausted, "volumes of %d bytes in all would pass the tenant's %d", sum+size, s.cfg.MaxBytesPerTenant)
	}
	v := Volume{TenantID: tenantID, Name: name, SizeBytes: size}
	if err := Prepare(&v, time.Now()); err != nil {
		return Volume{}, err
	}
	defer s.lock(v.ID)()
	if err := s.host.Create(ctx, v.ID, size); err != nil {
		return Volume{}, err
	}
	out, err := s.store.CreateVolume(ctx, v)
	if err != nil {
		if rerr := s.host.Remove(v.ID); rerr != nil {
			s.cfg.Logger.Warn("volume: remove file after failed create", logkey.Err, rerr)
		}
		return Volume{}, err
	}
	return out, nil
}

// Get returns tenantID's volume ref (a name or an id).
func (s *Service) Get(ctx context.Context, tenantID, ref string) (Volume, error) {
	return s.store.GetVolume(ctx, tenantID, ref)
}

// List returns tenantID's volumes.
func (s *Service) List(ctx context.Context, tenantID string) ([]Volume, error) {
	return s.store.ListVolumes(ctx, tenantID)
}

// Usage is how many bytes of the host's disk tenantID's volume ref holds.
func (s *Service) Usage(ctx context.Context, tenantID, ref string) (int64, error) {
	v, err := s.store.GetVolume(ctx, tenantID, ref)
	if err != nil {
		return 0, err
	}
	return s.host.Usage(v.ID)
}

// Users returns the live contexts that mount tenantID's volume ref.
func (s *Service) Users(ctx context.Context, tenantID, ref string) ([]string, error) {
	v, err := s.store.GetVolume(ctx, tenantID, ref)
	if err != nil {
		return nil, err
	}
	return s.store.VolumeUsers(ctx, tenantID, v.ID)
}

// Delete removes tenantID's volume ref, refused (failed_precondition)
// while a live context mounts it.
func (s *Service) Delete(ctx context.Context, tenantID, ref string) error {
	v, err := s.store.GetVolume(ctx, tenantID, ref)
	if err != nil {
		return err
	}
	defer s.lock(v.ID)()
	if err := s.store.DeleteVolume(ctx, tenantID, v.ID); err != nil {
		return err
	}
	return s.host.Remove(v.ID)
}

// Request is a mount as a caller asks for it: the volume by name or id.
type Request struct {
	Volume   string
	Path     string
	ReadOnly bool
}

// Resolve turns tenantID's requests into mounts by volume id, checking
// paths first: a volume the tenant does not have is not_found, whoever
// has it.
func (s *Service) Resolve(ctx context.Context, tenantID string, reqs []Request) ([]Mount, error) {
	out := make([]Mount, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, Mount{VolumeID: r.Volume, Path: r.Path, ReadOnly: r.ReadOnly})
	}
	if err := CheckMounts(out); err != nil {
		return nil, err
	}
	for i, r := range reqs {
		if r.Volume == "" {
			return nil, errdefs.Sentence(errdefs.ErrInvalidArgument, "volume mount at %q names no volume", r.Path)
		}
		v, err := s.store.GetVolume(ctx, tenantID, r.Volume)
		if err != nil {
			return nil, err
		}
		out[i].VolumeID = v.ID
	}
	return out, nil
}

// Open records that contextID of tenantID mounts m and returns the
// volume's file system as a detached mount, which the caller closes
// (provider/local hands it to the runtime). A volume deleted meanwhile is
// not_found: the record goes before the file, under the volume's lock.
func (s *Service) Open(ctx context.Context, tenantID, contextID string, m Mount) (int, error) {
	if !ValidID(m.VolumeID) {
		return -1, NotFound(m.VolumeID)
	}
	defer s.lock(m.VolumeID)()
	if err := s.store.AttachVolume(ctx, tenantID, contextID, m); err != nil {
		return -1, err
	}
	return s.host.Open(m.VolumeID)
}

// Mounts returns the volumes tenantID's context contextID mounts, with
// their names (a volume deleted since is left out).
func (s *Service) Mounts(ctx context.Context, tenantID, contextID string) ([]Mounted, error) {
	ms, err := s.store.ContextVolumes(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	out := make([]Mounted, 0, len(ms))
	for _, m := range ms {
		v, err := s.store.GetVolume(ctx, tenantID, m.VolumeID)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Mounted{Mount: m, Name: v.Name})
	}
	return out, nil
}

// Mounted is a mount with its volume's name.
type Mounted struct {
	Mount
	Name string
}

// Sweep removes the files of volumes that have no record (their tenant
// was deleted, or a create stopped between the two) and are older than
// grace; it needs an unscoped ctx. It returns how many it removed.
func (s *Service) Sweep(ctx context.Context, grace time.Duration) (int, error) {
	files, err := s.host.IDs()
	if err != nil {
		return 0, err
	}
	all, err := s.store.ListVolumes(ctx, "")
	if err != nil {
		return 0, err
	}
	known := make(map[string]bool, len(all))
	for _, v := range all {
		known[v.ID] = true
	}
	n := 0
	var errs []error
	for id, mod := range files {
		if known[id] || time.Since(mod) < grace {
			continue
		}
		unlock := s.lock(id)
		err := s.host.Remove(id)
		unlock()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		s.cfg.Logger.Info("volume file without a record removed", "volume", id)
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("volume sweep: %w", errors.Join(errs...))
	}
	return n, nil
}
