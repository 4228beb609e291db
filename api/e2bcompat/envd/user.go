package envd

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/errdefs"
)

// SandboxUser is the default user of commands and file calls, as on E2B.
// A call may name root instead: root of the sandbox's user namespace, which
// sandboxes on image templates have (the agent runs as it and starts the
// user's processes without privileges); elsewhere the agent refuses root
// with failed_precondition, never running the call as the user instead.
const SandboxUser = agent.DefaultUser

// errUser explains a refused user.
func errUser(name string) error {
	return fmt.Errorf("user %q does not exist in the sandbox: calls run as %q (the default) or %q", name, SandboxUser, agent.RootUser)
}

// checkUser maps a requested user name to the agent's ("" is the default).
func checkUser(name string) (string, error) {
	switch name {
	case "", SandboxUser:
		return "", nil
	case agent.RootUser:
		return name, nil
	}
	return "", fmt.Errorf("%w: %w", errUser(name), errdefs.ErrInvalidArgument)
}

// rpcUser reads the user of an envd Connect call, which the SDKs name in
// an `Authorization: Basic base64(user:)` header (absent: the default
// user).
func rpcUser(h http.Header) (string, error) {
	name := ""
	if a := h.Get("Authorization"); a != "" {
		scheme, cred, _ := strings.Cut(a, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return "", connect.NewError(connect.CodeUnauthenticated, errors.New("Authorization must be Basic user:"))
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return "", connect.NewError(connect.CodeInvalidArgument, errors.New("Authorization: bad base64"))
		}
		name, _, _ = strings.Cut(string(b), ":")
	}
	user, err := checkUser(name)
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, errUser(name))
	}
	return user, nil
}

// fileUser reads the username query of /files into the request's context
// (agent.WithUser), or answers 400 for an unknown user.
func fileUser(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	user, err := checkUser(r.URL.Query().Get("username"))
	if err != nil {
		core.WriteJSON(w, http.StatusBadRequest, core.APIError{Code: http.StatusBadRequest, Message: errUser(r.URL.Query().Get("username")).Error()})
		return r, false
	}
	return r.WithContext(agent.WithUser(r.Context(), user)), true
}

// userInterceptor applies rpcUser to every envd Connect call, unary and
// streaming, before the method runs, and hands the user on in the call's
// context (agent.WithUser): file calls pick it up there, process starts
// copy it into their ExecParams.
type userInterceptor struct{}

func (userInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		user, err := rpcUser(req.Header())
		if err != nil {
			return nil, err
		}
		return next(agent.WithUser(ctx, user), req)
	}
}

func (userInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (userInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		user, err := rpcUser(conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(agent.WithUser(ctx, user), conn)
	}
}
