package client

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/sandlot/sandlot/api"
)

// CreateSnapshot makes a template of the tenant's from a context's
// filesystem (its writable layer over its template); name "" lets the
// server choose one. Start a context from it by its ID or Name.
func (c *Client) CreateSnapshot(ctx context.Context, contextID, name string) (*api.Snapshot, error) {
	body, err := json.Marshal(api.SnapshotRequest{Name: name})
	if err != nil {
		return nil, err
	}
	var out api.Snapshot
	if err := c.do(ctx, "POST", "/v1/contexts/"+url.PathEscape(contextID)+"/snapshots", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSnapshots lists the tenant's snapshots, newest first; contextID,
// when not "", only those taken from that context.
func (c *Client) ListSnapshots(ctx context.Context, contextID string) (*api.SnapshotList, error) {
	var q url.Values
	if contextID != "" {
		q = url.Values{"contextId": {contextID}}
	}
	var out api.SnapshotList
	if err := c.do(ctx, "GET", "/v1/snapshots", q, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSnapshot deletes one of the tenant's snapshots by id or name.
func (c *Client) DeleteSnapshot(ctx context.Context, idOrName string) error {
	return c.do(ctx, "DELETE", "/v1/snapshots/"+url.PathEscape(idOrName), nil, nil, "", nil)
}

// Fork starts a new context on pathID of the source's conversation from
// a snapshot of context contextID's filesystem. The result says whether memory came along (false on crun
// and runc: the fork's kernels start fresh).
func (c *Client) Fork(ctx context.Context, contextID, pathID string) (*api.ForkResult, error) {
	body, err := json.Marshal(api.ForkRequest{PathID: pathID})
	if err != nil {
		return nil, err
	}
	var out api.ForkResult
	if err := c.do(ctx, "POST", "/v1/contexts/"+url.PathEscape(contextID)+"/fork", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Suspend suspends a context to disk (POST /v1/contexts/{id}/suspend):
// its files kept, its sandbox and memory freed; its next call wakes it
// with its kernels fresh (the result says woken).
func (c *Client) Suspend(ctx context.Context, contextID string) (*api.Context, error) {
	var out api.Context
	if err := c.do(ctx, "POST", "/v1/contexts/"+url.PathEscape(contextID)+"/suspend", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
