package client

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/sandlot/sandlot/api"
)

// CreateVolume creates the tenant's volume name of size bytes (0: the
// server's default).
func (c *Client) CreateVolume(ctx context.Context, name string, sizeBytes int64) (*api.Volume, error) {
	body, err := json.Marshal(api.VolumeRequest{Name: name, SizeBytes: sizeBytes})
	if err != nil {
		return nil, err
	}
	var out api.Volume
	if err := c.do(ctx, "POST", "/v1/volumes", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListVolumes returns the tenant's volumes.
func (c *Client) ListVolumes(ctx context.Context) (*api.VolumeList, error) {
	var out api.VolumeList
	if err := c.do(ctx, "GET", "/v1/volumes", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetVolume returns one volume by name or id, with its usage and the
// contexts that mount it.
func (c *Client) GetVolume(ctx context.Context, nameOrID string) (*api.Volume, error) {
	var out api.Volume
	if err := c.do(ctx, "GET", "/v1/volumes/"+url.PathEscape(nameOrID), nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteVolume deletes one of the tenant's volumes; one a live context
// mounts is failed_precondition.
func (c *Client) DeleteVolume(ctx context.Context, nameOrID string) error {
	return c.do(ctx, "DELETE", "/v1/volumes/"+url.PathEscape(nameOrID), nil, nil, "", nil)
}
