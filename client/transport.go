package client

// The transport every call shares: the request with the client's key and
// headers, its send, the JSON decode, and the mapping of an error answer
// to errdefs' categories.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*http.Request, error) {
	if c.err != nil {
		return nil, c.err
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", c.agent)
	return req, nil
}

// send does req and turns a non-2xx answer into an error.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ctxErr)
		}
		// Both wrapped: the caller can tell a server that is not there
		// (a *net.OpError dialing) from one that failed.
		return nil, fmt.Errorf("%s %s: %w: %w", req.Method, req.URL.Path, err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, errorFrom(resp)
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, contentType string, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := c.request(ctx, method, path, q, r, contentType)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeInto(resp, out)
}

func decodeInto(resp *http.Response, out any) error {
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s response: %w", resp.Request.URL.Path, err)
	}
	return nil
}

// errorFrom decodes {code, message}; a body that is not one (a proxy's
// page) still gets a category from the status.
func errorFrom(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e api.Error
	if json.Unmarshal(b, &e) == nil && e.Code != "" {
		return &e
	}
	code := errdefs.CodeInternal
	switch {
	case resp.StatusCode == http.StatusNotFound:
		code = errdefs.CodeNotFound
	case resp.StatusCode == http.StatusUnauthorized:
		code = errdefs.CodeUnauthenticated
	case resp.StatusCode == http.StatusForbidden:
		code = errdefs.CodePermissionDenied
	case resp.StatusCode == http.StatusRequestEntityTooLarge, resp.StatusCode == http.StatusTooManyRequests:
		code = errdefs.CodeResourceExhausted
	case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusBadGateway:
		code = errdefs.CodeUnavailable
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		code = errdefs.CodeInvalidArgument
	}
	return &api.Error{Code: code, Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))}
}

// IsNotFound reports whether err is a not_found error (an unknown id, or
// another tenant's context).
func IsNotFound(err error) bool { return errors.Is(err, errdefs.ErrNotFound) }

// IsInvalidArgument reports whether err is an invalid_argument error.
func IsInvalidArgument(err error) bool { return errors.Is(err, errdefs.ErrInvalidArgument) }

// IsResourceExhausted reports whether err is a resource_exhausted error
// (a limit, or a body over the size limit).
func IsResourceExhausted(err error) bool { return errors.Is(err, errdefs.ErrResourceExhausted) }

// IsUnauthenticated reports whether err is an unauthenticated error.
func IsUnauthenticated(err error) bool { return errors.Is(err, errdefs.ErrUnauthenticated) }

// IsPermissionDenied reports whether err is a permission_denied error
// (e.g. a guard-mode override from a tenant that is not an admin).
func IsPermissionDenied(err error) bool { return errors.Is(err, errdefs.ErrPermissionDenied) }

// IsUnavailable reports whether err is an unavailable error (the server
// or its runtime cannot be reached).
func IsUnavailable(err error) bool { return errors.Is(err, errdefs.ErrUnavailable) }

// Code returns the wire code of err ("" for nil).
func Code(err error) errdefs.Code {
	if err == nil {
		return ""
	}
	var e *api.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return errdefs.CodeOf(err)
}
