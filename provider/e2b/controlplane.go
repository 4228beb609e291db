package e2b

// Calls to E2B's control plane (the REST API): JSON in and out, retries
// where a repeat is safe, and E2B's answers mapped to error categories.

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
	"time"

	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
)

// setTimeout sets the sandbox's E2B timeout to ttl from now; it is
// retried on a transient failure (a repeat sets the same time or later).
func (p *Provider) setTimeout(ctx context.Context, id string, ttl time.Duration) error {
	return p.api(idempotent(ctx), http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/timeout", map[string]int64{"timeout": int64(ttl / time.Second)}, nil)
}

func (p *Provider) api(ctx context.Context, method, path string, in, out any) error {
	_, err := p.apiHeader(ctx, method, path, in, out)
	return err
}

// apiHeader calls the control plane and decodes the JSON answer. A GET or
// DELETE is retried on a transient failure (retry.go); other methods only
// when the caller marks ctx idempotent.
func (p *Provider) apiHeader(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	if method == http.MethodGet || method == http.MethodDelete {
		ctx = idempotent(ctx)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	// An earlier deadline of the caller's (create's) still wins.
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.APIURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("bad API URL: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	req.Header.Set(e2bwire.HeaderAPIKey, p.cfg.APIKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, transportError(p.cfg.APIURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, transportError(p.cfg.APIURL, err)
	}
	if resp.StatusCode >= 300 {
		return nil, statusError(resp.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("decode %s %s answer: %v: %w", method, path, err, errdefs.ErrUnavailable)
		}
	}
	return resp.Header, nil
}

// transportError: E2B could not be reached or did not answer in time.
func transportError(target string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("cannot reach E2B at %s: %v: %w", target, err, errdefs.ErrUnavailable)
}

// statusError maps an E2B HTTP error to a category. A rejected key and a
// rate or concurrency limit make E2B unavailable to sandlot, so a chain
// falls back.
func statusError(status int, body []byte) error {
	var e struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &e)
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200]
		}
	}
	var cat error
	switch {
	case status == http.StatusNotFound:
		cat = errdefs.ErrNotFound
	case status == http.StatusBadRequest:
		cat = errdefs.ErrInvalidArgument
	case status == http.StatusConflict:
		cat = errdefs.ErrAlreadyExists
	case status == http.StatusNotImplemented:
		cat = errdefs.ErrFailedPrecondition
	default: // 401, 403, 429, 5xx
		cat = errdefs.ErrUnavailable
	}
	return fmt.Errorf("E2B answered %d: %s: %w", status, msg, cat)
}
