package client

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/sandlot/sandlot/api"
)

// ListKeys lists the API keys of the caller's tenant, oldest first: their
// ids, names and prefixes, never a key; Current marks the one the client
// sends.
func (c *Client) ListKeys(ctx context.Context) (*api.APIKeyList, error) {
	var out api.APIKeyList
	if err := c.do(ctx, "GET", "/v1/keys", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateKey makes an API key of the caller's tenant labelled name ("" for
// none). The answer's Key is the key itself, shown this once: the server
// keeps only its hash.
func (c *Client) CreateKey(ctx context.Context, name string) (*api.APIKeyCreated, error) {
	body, err := json.Marshal(api.APIKeyRequest{Name: name})
	if err != nil {
		return nil, err
	}
	var out api.APIKeyCreated
	if err := c.do(ctx, "POST", "/v1/keys", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeKey revokes one of the tenant's API keys by id (key_...); the
// tenant's last key is failed_precondition, another tenant's not_found.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/keys/"+url.PathEscape(id), nil, nil, "", nil)
}

// Usage returns the caller's tenant's quotas and its use of each now.
func (c *Client) Usage(ctx context.Context) (*api.Usage, error) {
	var out api.Usage
	if err := c.do(ctx, "GET", "/v1/usage", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
