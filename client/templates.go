package client

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
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
	return sendBody[api.Template](ctx, c, "POST", "/v1/templates", url.Values{"name": {name}, "settings": {string(st)}}, r, "application/x-tar")
}

// BuildOptions name a build with a context (BuildTemplate).
type BuildOptions struct {
	// Name is the template's name, NAME or NAME:TAG.
	Name string
	// Dockerfile is the Dockerfile's path inside the context; "":
	// Dockerfile.
	Dockerfile string
	BuildArgs  map[string]string
	// Settings override what the build gives the template.
	Settings api.TemplateSettings
}

// BuildTemplate uploads a build context (a tar, or a gzip of one, holding
// the Dockerfile and what it COPYs) and queues a build of the tenant's
// template opt.Name. Follow it with TemplateBuild or WaitTemplateBuild.
func (c *Client) BuildTemplate(ctx context.Context, opt BuildOptions, tarball io.Reader) (*api.TemplateBuild, error) {
	q := url.Values{"name": {opt.Name}}
	if opt.Dockerfile != "" {
		q.Set("dockerfile", opt.Dockerfile)
	}
	for _, k := range slices.Sorted(maps.Keys(opt.BuildArgs)) {
		q.Add("buildArg", k+"="+opt.BuildArgs[k])
	}
	st, err := json.Marshal(opt.Settings)
	if err != nil {
		return nil, err
	}
	q.Set("settings", string(st))
	return sendBody[api.TemplateBuild](ctx, c, "POST", "/v1/templates/builds", q, tarball, "application/x-tar")
}

// BuildTemplateDockerfile queues a build of a Dockerfile that needs no
// context (its steps COPY nothing).
func (c *Client) BuildTemplateDockerfile(ctx context.Context, req api.TemplateBuildRequest) (*api.TemplateBuild, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out api.TemplateBuild
	if err := c.do(ctx, "POST", "/v1/templates/builds", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TemplateBuild returns a build's state, with its log from entry
// logsOffset (ask next from the answer's LogsNext).
func (c *Client) TemplateBuild(ctx context.Context, buildID string, logsOffset int) (*api.TemplateBuild, error) {
	var out api.TemplateBuild
	q := url.Values{"logsOffset": {strconv.Itoa(logsOffset)}}
	if err := c.do(ctx, "GET", "/v1/templates/builds/"+url.PathEscape(buildID), q, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitTemplateBuild polls a build every interval (0: 500 ms) until it
// ends, handing each new log entry to onLog (nil: none). It returns the
// final state; a failed build is also a failed_precondition error with
// the build's reason.
func (c *Client) WaitTemplateBuild(ctx context.Context, buildID string, interval time.Duration, onLog func(api.TemplateBuildLog)) (*api.TemplateBuild, error) {
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	next := 0
	for {
		b, err := c.TemplateBuild(ctx, buildID, next)
		if err != nil {
			return nil, err
		}
		for _, l := range b.Logs {
			if onLog != nil {
				onLog(l)
			}
		}
		next = b.LogsNext
		switch b.Status {
		case api.BuildReady:
			return b, nil
		case api.BuildError:
			return b, &api.Error{Code: errdefs.CodeFailedPrecondition, Message: "build " + buildID + " failed: " + b.Reason}
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return b, ctx.Err()
		case <-t.C:
		}
	}
}
