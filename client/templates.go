package client

import (
	"context"
	"encoding/json"
	"io"
	"net/url"

	"github.com/sandlot/sandlot/api"
)

// ListTemplates returns the templates the tenant can start sandboxes
// from: the built-ins, its own and the public ones.
func (c *Client) ListTemplates(ctx context.Context) (*api.TemplateList, error) {
	var out api.TemplateList
	if err := c.do(ctx, "GET", "/v1/templates", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTemplate returns one template by name or id.
func (c *Client) GetTemplate(ctx context.Context, nameOrID string) (*api.Template, error) {
	var out api.Template
	if err := c.do(ctx, "GET", "/v1/templates/"+url.PathEscape(nameOrID), nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTemplate deletes one of the tenant's templates.
func (c *Client) DeleteTemplate(ctx context.Context, nameOrID string) error {
	return c.do(ctx, "DELETE", "/v1/templates/"+url.PathEscape(nameOrID), nil, nil, "", nil)
}

// PullTemplate has the server pull an image reference from its registry
// and record it as the tenant's template name.
func (c *Client) PullTemplate(ctx context.Context, name, ref string, settings api.TemplateSettings) (*api.Template, error) {
	body, err := json.Marshal(api.TemplateRequest{Name: name, Ref: ref, Settings: settings})
	if err != nil {
		return nil, err
	}
	var out api.Template
	if err := c.do(ctx, "POST", "/v1/templates", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ImportTemplate uploads an OCI layout or docker-archive tarball (r) of
// one image and records it as the tenant's template name.
func (c *Client) ImportTemplate(ctx context.Context, name string, settings api.TemplateSettings, r io.Reader) (*api.Template, error) {
	st, err := json.Marshal(settings)
	if err != nil {
		return nil, err
	}
	req, err := c.request(ctx, "POST", "/v1/templates", url.Values{"name": {name}, "settings": {string(st)}}, r, "application/x-tar")
	if err != nil {
		return nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.Template
	if err := decodeInto(resp, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
