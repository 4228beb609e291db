package e2bcompat

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// SandboxUser is the one user commands and file calls run as. The sandbox's
// processes have no capabilities and no way to gain them (no_new_privs), so
// there is no root to run as: a call that asks for root is refused rather
// than run as this user behind the caller's back.
const SandboxUser = "user"

// errUser explains a refused user.
func errUser(name string) error {
	if name == "root" {
		return fmt.Errorf("user root is not supported by sandlot: commands and file calls run as %q, and a sandbox has no root to become", SandboxUser)
	}
	return fmt.Errorf("user %q does not exist in the sandbox: commands and file calls run as %q", name, SandboxUser)
}

// rpcUser checks the user of an envd Connect call, which the SDKs name in
// an `Authorization: Basic base64(user:)` header (absent: the default
// user). Root is unimplemented; any other name but SandboxUser is
// invalid_argument.
func rpcUser(h http.Header) error {
	name := ""
	if a := h.Get("Authorization"); a != "" {
		scheme, cred, _ := strings.Cut(a, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return connect.NewError(connect.CodeUnauthenticated, errors.New("Authorization must be Basic user:"))
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, errors.New("Authorization: bad base64"))
		}
		name, _, _ = strings.Cut(string(b), ":")
	}
	switch name {
	case "", SandboxUser:
		return nil
	case "root":
		return connect.NewError(connect.CodeUnimplemented, errUser(name))
	}
	return connect.NewError(connect.CodeInvalidArgument, errUser(name))
}

// userAllowed checks the username query of /files and answers a refusal:
// 501 for root (the SDK throws SandboxError with the message), 400 for an
// unknown user.
func userAllowed(w http.ResponseWriter, name string) bool {
	switch name {
	case "", SandboxUser:
		return true
	case "root":
		writeJSON(w, http.StatusNotImplemented, apiError{Code: http.StatusNotImplemented, Message: errUser(name).Error()})
	default:
		writeJSON(w, http.StatusBadRequest, apiError{Code: http.StatusBadRequest, Message: errUser(name).Error()})
	}
	return false
}

// userInterceptor applies rpcUser to every envd Connect call, unary and
// streaming, before the method runs.
type userInterceptor struct{}

func (userInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := rpcUser(req.Header()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (userInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (userInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := rpcUser(conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
