// Package source brings images into the image store: pulled from any OCI
// registry, or imported from an OCI image layout (directory or tarball) or
// a docker-archive tarball (`docker save`). Every image is resolved to
// linux/amd64 and stored by manifest digest; layers are verified and
// unpacked by the store.
package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
)

// Platform is the only platform sandboxes run.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// PullOptions configures Pull. Zero values are documented per field.
type PullOptions struct {
	// Keychain supplies registry credentials; nil: authn.DefaultKeychain,
	// which reads the docker config ($DOCKER_CONFIG/config.json or
	// ~/.docker/config.json, with its credential helpers).
	Keychain authn.Keychain
	// Insecure allows plain HTTP to any registry. Loopback and private
	// addresses use HTTP anyway.
	Insecure bool
	// Transport for registry requests; nil: remote.DefaultTransport.
	Transport http.RoundTripper
	// Name names the image, and its pin (Pulled.Pinned) names it too,
	// each only when new (image.PutOptions.Name: already_exists over
	// another image's name). "": the image is stored without a name; hold
	// a lease until something keeps it (a template record, a build), or
	// GC removes it. A reference is the puller's input: nothing names the
	// shared store after it unless the caller asks.
	Name string
	// Progress, when set, reports layers as they are fetched and unpacked.
	Progress func(image.Progress)
	// Untrusted: a tenant's pull, whose layers must prove their content
	// (image.PutOptions.Untrusted): each is downloaded, also when the
	// store has it.
	Untrusted bool
}

// Pulled is the result of Pull.
type Pulled struct {
	image.Image
	// Name is the name the image was given (PullOptions.Name), or "".
	Name string
	// Pinned is the reference that names exactly this image
	// (repository@sha256:<manifest digest>); a store name too when Name
	// is set.
	Pinned string
}

// Pull fetches ref (name:tag or name@sha256:digest) for linux/amd64 into s.
// A digest reference is verified: the registry cannot substitute content.
func Pull(ctx context.Context, s *image.Store, ref string, opt PullOptions) (Pulled, error) {
	var nopts []name.Option
	if opt.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return Pulled{}, fmt.Errorf("source: reference %q: %v: %w", ref, err, errdefs.ErrInvalidArgument)
	}
	keys := opt.Keychain
	if keys == nil {
		keys = authn.DefaultKeychain
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keys), remote.WithPlatform(Platform)}
	var refused *refusals
	if opt.Transport != nil {
		refused = &refusals{next: opt.Transport}
		ropts = append(ropts, remote.WithTransport(refused))
	}
	p, err := pull(ctx, s, r, ropts, opt)
	if err != nil && refused.first() != nil {
		// A connection the transport refused (permission_denied) is the
		// cause, however deep in a blob's error it ended up.
		return Pulled{}, fmt.Errorf("source: pull %s: %v: %w", r, refused.first(), errdefs.ErrPermissionDenied)
	}
	return p, err
}

// refusals passes requests to next and keeps the first error that is a
// refusal (errdefs.ErrPermissionDenied) of the transport's own.
type refusals struct {
	next http.RoundTripper
	mu   sync.Mutex
	err  error
}

func (t *refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil && errors.Is(err, errdefs.ErrPermissionDenied) {
		t.mu.Lock()
		if t.err == nil {
			t.err = err
		}
		t.mu.Unlock()
	}
	return resp, err
}

func (t *refusals) first() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func pull(ctx context.Context, s *image.Store, r name.Reference, ropts []remote.Option, opt PullOptions) (Pulled, error) {
	img, err := remote.Image(r, ropts...)
	if err != nil {
		return Pulled{}, fmt.Errorf("source: pull %s: %w", r, classify(err))
	}
	if err := checkPlatform(img); err != nil {
		return Pulled{}, fmt.Errorf("source: pull %s: %w", r, err)
	}
	stored, err := s.Put(ctx, img, image.PutOptions{Name: opt.Name, Progress: opt.Progress, Untrusted: opt.Untrusted})
	if err != nil {
		return Pulled{}, fmt.Errorf("source: pull %s: %w", r, err)
	}
	pinned := r.Context().Digest(stored.Digest.String()).Name()
	if opt.Name != "" {
		if err := s.TagNew(ctx, pinned, stored.Digest); err != nil {
			return Pulled{}, err
		}
	}
	return Pulled{Image: stored, Name: opt.Name, Pinned: pinned}, nil
}

// checkPlatform refuses images built for another platform: a registry that
// serves a single-platform manifest is not filtered by WithPlatform.
func checkPlatform(img v1.Image) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if (cf.OS != "" && cf.OS != Platform.OS) || (cf.Architecture != "" && cf.Architecture != Platform.Architecture) {
		return fmt.Errorf("image is %s/%s, sandboxes run %s/%s: %w", cf.OS, cf.Architecture, Platform.OS, Platform.Architecture, errdefs.ErrInvalidArgument)
	}
	return nil
}

// classify maps registry errors onto errdefs categories.
func classify(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
		case http.StatusUnauthorized:
			return fmt.Errorf("%v: %w", err, errdefs.ErrUnauthenticated)
		case http.StatusForbidden:
			return fmt.Errorf("%v: %w", err, errdefs.ErrPermissionDenied)
		case http.StatusTooManyRequests:
			return fmt.Errorf("%v: %w", err, errdefs.ErrResourceExhausted)
		}
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
}
