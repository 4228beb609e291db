package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// appError is an error with an errdefs category name.
type appError struct {
	code     int
	category errdefs.Code
	msg      string
}

func (e *appError) Error() string { return e.msg }

func errf(category errdefs.Code, format string, args ...any) error {
	return &appError{code: agent.CodeAppError, category: category, msg: fmt.Sprintf(format, args...)}
}

func badParams(err error) error {
	return &appError{code: agent.CodeInvalidParams, category: errdefs.CodeInvalidArgument, msg: "invalid params: " + err.Error()}
}

// categoryOf maps OS errors to errdefs category names.
func categoryOf(err error) errdefs.Code {
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.ENOTEMPTY): // before ErrExist, which also matches ENOTEMPTY
		return errdefs.CodeFailedPrecondition
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.CodeNotFound
	case errors.Is(err, fs.ErrExist):
		return errdefs.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return errdefs.CodePermissionDenied
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EMFILE),
		errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM):
		return errdefs.CodeResourceExhausted
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY),
		errors.Is(err, syscall.EXDEV), errors.Is(err, syscall.EBUSY):
		return errdefs.CodeFailedPrecondition
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		return errdefs.CodeInvalidArgument
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return errdefs.CodeUnavailable
	case errors.As(err, &errno):
		return errdefs.CodeInternal
	}
	return errdefs.CodeInternal
}
