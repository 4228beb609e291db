package contexts

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// Bounds on the environment a call passes (run_code, run_analysis and
// bash's env, and its declared secrets). They keep one request's
// environment well inside an agent frame and the kernel's exec limits.
const (
	MaxEnvVars      = 64       // names in env and secrets together
	MaxEnvNameLen   = 128      // bytes
	MaxEnvValueLen  = 32 << 10 // bytes of one value
	MaxEnvBytes     = 256 << 10
	MaxSecrets      = 32
	MaxSecretLen    = 4 << 10
	MinSecretLen    = 8 // shorter values would mask ordinary words
	envNameReserved = "SANDLOT_"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnv validates a call's environment and its declared secrets (name
// to value; the values are secret, never echoed): POSIX names not starting
// with SANDLOT_ (the agent's own), no NUL in values, the bounds above,
// secrets of MinSecretLen..MaxSecretLen bytes, and no name in both. Errors
// are invalid_argument naming the variable.
func CheckEnv(env, secrets map[string]string) error {
	if n := len(env) + len(secrets); n > MaxEnvVars {
		return fmt.Errorf("%d environment variables (limit %d): %w", n, MaxEnvVars, errdefs.ErrInvalidArgument)
	}
	if len(secrets) > MaxSecrets {
		return fmt.Errorf("%d secrets (limit %d): %w", len(secrets), MaxSecrets, errdefs.ErrInvalidArgument)
	}
	total := 0
	for _, set := range []struct {
		what string
		m    map[string]string
	}{{"env", env}, {"secret", secrets}} {
		for _, k := range slices.Sorted(maps.Keys(set.m)) {
			v := set.m[k]
			switch {
			case len(k) > MaxEnvNameLen:
				return fmt.Errorf("%s name %.32q... is longer than %d bytes: %w", set.what, k, MaxEnvNameLen, errdefs.ErrInvalidArgument)
			case !envNameRE.MatchString(k):
				return fmt.Errorf("%s name %q is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*): %w", set.what, k, errdefs.ErrInvalidArgument)
			case strings.HasPrefix(strings.ToUpper(k), envNameReserved):
				return fmt.Errorf("%s name %q: the prefix %s is reserved: %w", set.what, k, envNameReserved, errdefs.ErrInvalidArgument)
			case strings.IndexByte(v, 0) >= 0:
				return fmt.Errorf("%s %s: the value holds a NUL byte: %w", set.what, k, errdefs.ErrInvalidArgument)
			case len(v) > MaxEnvValueLen:
				return fmt.Errorf("%s %s: the value is %d bytes (limit %d): %w", set.what, k, len(v), MaxEnvValueLen, errdefs.ErrInvalidArgument)
			}
			if set.what == "secret" {
				if len(v) < MinSecretLen || len(v) > MaxSecretLen {
					return fmt.Errorf("secret %s: the value must be %d to %d bytes: %w", k, MinSecretLen, MaxSecretLen, errdefs.ErrInvalidArgument)
				}
				if _, ok := env[k]; ok {
					return fmt.Errorf("%s is both in env and in secrets: %w", k, errdefs.ErrInvalidArgument)
				}
			}
			total += len(k) + len(v)
		}
	}
	if total > MaxEnvBytes {
		return fmt.Errorf("the environment is %d bytes (limit %d): %w", total, MaxEnvBytes, errdefs.ErrInvalidArgument)
	}
	return nil
}

type secretsKey struct{}

// WithSecrets returns a context carrying a call's declared secrets (name
// to value), checked by CheckEnv. The tools that run code inject them as
// environment variables; the Manager remembers their values for the
// context the call reaches and has the guard mask them in everything that
// leaves it from then on (MaskedValues), whichever edge reads it.
func WithSecrets(ctx context.Context, secrets map[string]string) context.Context {
	if len(secrets) == 0 {
		return ctx
	}
	return context.WithValue(ctx, secretsKey{}, maps.Clone(secrets))
}

// SecretsFrom returns the declared secrets of ctx's call (nil: none). The
// map is the caller's: do not modify it.
func SecretsFrom(ctx context.Context) map[string]string {
	m, _ := ctx.Value(secretsKey{}).(map[string]string)
	return m
}

type maskedKey struct{}

// WithMasked returns ctx carrying values the guard masks (MaskedValues).
// The Manager sets it from a context's declared secrets; it only ever adds
// masking, so it needs no permission.
func WithMasked(ctx context.Context, values []string) context.Context {
	if len(values) == 0 {
		return ctx
	}
	return context.WithValue(ctx, maskedKey{}, values)
}

// MaskedValues returns the values the guard must mask in what it redacts
// under ctx: the declared secrets of the context being served (every call
// that reached it so far) and of this call. The guard implementation
// reads it; the slice is shared, do not modify it.
func MaskedValues(ctx context.Context) []string {
	v, _ := ctx.Value(maskedKey{}).([]string)
	return v
}

// maxContextSecrets bounds the distinct secret values one context
// remembers.
const maxContextSecrets = 256

// mask adds the call's declared secret values to e's and returns ctx
// carrying all of them for the guard. The values live as long as e, in
// memory only (never in the store): after a daemon restart a context's
// earlier secrets are masked again once a call declares them.
func (m *Manager) mask(ctx context.Context, e *entry) (context.Context, error) {
	call := SecretsFrom(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(call) == 0 && len(e.secrets) == 0 {
		return ctx, nil // nothing to mask (a sorted copy of no keys was an allocation per call)
	}
	for _, k := range slices.Sorted(maps.Keys(call)) {
		v := call[k]
		if slices.Contains(e.secrets, v) {
			continue
		}
		if len(e.secrets) >= maxContextSecrets {
			return ctx, fmt.Errorf("context %s already masks %d secret values (limit %d): %w", e.rec.ID, len(e.secrets), maxContextSecrets, errdefs.ErrResourceExhausted)
		}
		e.secrets = append(e.secrets, v)
	}
	return WithMasked(ctx, slices.Clone(e.secrets)), nil
}

// Masked returns ctx carrying the declared secret values of context
// contextID (MaskedValues), for the guard when it redacts what the
// context's sandbox sent by a way other than a call (its ports, the
// names in its audit events). An unknown context, or one that declared
// none, adds nothing.
func (m *Manager) Masked(ctx context.Context, contextID string) context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[contextID]
	if !ok || len(e.secrets) == 0 {
		return ctx
	}
	return WithMasked(ctx, slices.Clone(e.secrets))
}
