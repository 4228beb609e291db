package podimage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/sandlot/sandlot/errdefs"
)

// component is one path component of a repository in the distribution
// spec's grammar.
var component = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$`)

// ParseRef checks a reference to push to: REGISTRY/REPOSITORY[:TAG] or
// with @sha256:DIGEST, written out in full. Nothing is filled in: a
// reference without a registry ("sandlot/py", which docker would send to
// Docker Hub) or with capitals in its repository is invalid_argument
// with what is wrong, so a typo never pushes an image somewhere else.
// Loopback and private-range registries are spoken to over plain HTTP
// (go-containerregistry's rule), others over HTTPS.
func ParseRef(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %v (want REGISTRY/REPOSITORY:TAG, e.g. registry.example:5000/sandlot/py:1): %w", ref, err, errdefs.ErrInvalidArgument)
	}
	// go-containerregistry lets through components the distribution
	// spec's grammar has not (".."): a registry would refuse them later,
	// after credentials were sent.
	for _, c := range strings.Split(r.Context().RepositoryStr(), "/") {
		if !component.MatchString(c) {
			return nil, fmt.Errorf("image reference %q: repository component %q is not lower-case letters and digits joined by '.', '_', '__' or '-' (want REGISTRY/REPOSITORY:TAG): %w", ref, c, errdefs.ErrInvalidArgument)
		}
	}
	return r, nil
}

// Push writes img to ref with credentials from keychain (nil: anonymous;
// authn.DefaultKeychain reads the docker config, $DOCKER_CONFIG/config.json
// or ~/.docker/config.json, and its credential helpers) and returns the
// pushed image's pinned reference, REPOSITORY@sha256:DIGEST, which is what
// a pod should name: a tag may move. A reference naming a digest must
// name img's. Registry errors map to not_found, unauthenticated,
// permission_denied, resource_exhausted or unavailable.
func Push(ctx context.Context, img v1.Image, ref string, keychain authn.Keychain) (name.Digest, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return name.Digest{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("podimage: %w", err)
	}
	if dr, ok := r.(name.Digest); ok && dr.DigestStr() != d.String() {
		return name.Digest{}, fmt.Errorf("image reference %s names digest %s, the image is %s: %w", ref, dr.DigestStr(), d, errdefs.ErrInvalidArgument)
	}
	if keychain == nil {
		keychain = authn.NewMultiKeychain() // finds nothing: anonymous
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain)); err != nil {
		if ctx.Err() != nil {
			return name.Digest{}, fmt.Errorf("push %s: %w", r, ctx.Err())
		}
		return name.Digest{}, fmt.Errorf("push %s: %w", r, classify(err))
	}
	return r.Context().Digest(d.String()), nil
}

// classify maps a registry's answer onto errdefs categories.
func classify(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
		case http.StatusUnauthorized:
			return fmt.Errorf("%v (credentials come from the docker config: $DOCKER_CONFIG/config.json or ~/.docker/config.json): %w", err, errdefs.ErrUnauthenticated)
		case http.StatusForbidden:
			return fmt.Errorf("%v: %w", err, errdefs.ErrPermissionDenied)
		case http.StatusTooManyRequests:
			return fmt.Errorf("%v: %w", err, errdefs.ErrResourceExhausted)
		}
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
}
