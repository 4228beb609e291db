package errdefs

import (
	"errors"
	"time"
)

// Retry marks err as an expected state that passes (a template being
// built): the caller should try again after the given delay. An edge
// answers it with its category's status and a Retry-After header, and
// logs it as a state, not as a server fault. Retry(nil, d) is nil.
func Retry(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryError{err: err, after: after}
}

type retryError struct {
	err   error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// RetryAfter reports the delay err (or an error it wraps) asks callers
// to wait before trying again (Retry), and whether it asks at all.
func RetryAfter(err error) (time.Duration, bool) {
	var r *retryError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}
