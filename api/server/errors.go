package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/internal/slowbody"
)

func newID() string { return uuid.NewString() }

// RetryAfter is the Retry-After (seconds) of a request refused for a
// limit (429), on every surface.
const RetryAfter = "1"

// writeError is the one place an error becomes an HTTP response. Client
// faults keep their message; anything uncategorised is logged here and
// answered 500 "internal error".
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := s.errorBody(r, err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", RetryAfter)
	}
	if d, ok := errdefs.RetryAfter(err); ok { // an expected state: when to come back
		w.Header().Set("Retry-After", strconv.Itoa(int(max(d, time.Second).Round(time.Second).Seconds())))
	}
	writeJSON(w, status, body)
}

// isBodyTimeout reports whether err (from reading a body) is the front
// door's body deadline (slowbody), possibly wrapped by a decoder or a
// category.
func isBodyTimeout(err error) bool { return errors.Is(err, slowbody.ErrTimeout) }

// bodyTimeoutError is the 408 answer.
func bodyTimeoutError() api.Error {
	return api.Error{Code: errdefs.CodeDeadlineExceeded, Message: "the request body did not arrive in time"}
}

func errorStatus(err error) int {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	if isBodyTimeout(err) {
		return http.StatusRequestTimeout
	}
	return errdefs.HTTPStatus(err)
}

func (s *Server) errorBody(r *http.Request, err error) (int, api.Error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge, api.Error{
			Code:    errdefs.CodeResourceExhausted,
			Message: fmt.Sprintf("request body over the limit of %d bytes", tooBig.Limit),
		}
	}
	if isBodyTimeout(err) {
		return http.StatusRequestTimeout, bodyTimeoutError()
	}
	status := errdefs.HTTPStatus(err)
	reqID := r.Header.Get(api.HeaderRequestID)
	body := api.Error{Code: errdefs.CodeOf(err), Message: guard.SanitizeError(errdefs.PublicMessage(err))}
	// The caller reads one sentence; the whole chain is the log's, under
	// the request id that the answer carries too (the header, and the
	// body of a server fault, whose sentence points at the log).
	if _, ok := errdefs.RetryAfter(err); ok {
		// A state that passes (a template being built), not a fault.
		s.log.Info("not ready yet", slog.String(logkey.RequestID, reqID),
			slog.String(logkey.Route, r.Pattern), slog.String(logkey.Err, guard.SanitizeError(err.Error())))
	} else if errdefs.IsClientFault(err) {
		s.log.Debug("client error", slog.String(logkey.RequestID, reqID),
			slog.String(logkey.Route, r.Pattern), slog.String(logkey.Err, guard.SanitizeError(err.Error())))
	} else {
		s.log.Error("server fault", slog.String(logkey.RequestID, reqID),
			slog.String(logkey.Route, r.Pattern), slog.String(logkey.Err, err.Error()))
		body.RequestID = reqID
	}
	// A categorised message can still carry host details (a path in an
	// agent's message, a Go source position) or a value the guard should
	// redact: it leaves sanitized.
	return status, body
}

// decodeJSON reads a JSON body of at most Config.MaxBodyBytes into v.
// Unknown fields are rejected, so a misspelt "conversationID" is an error
// instead of a silently new conversation, naming the fields the body takes
// (api.DecodeStrict). An empty body decodes as {}. A body over the limit
// or past its deadline is returned as the reader's error.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return api.DecodeStrict(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), v)
}

func invalid(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalidArgument)...)
}
