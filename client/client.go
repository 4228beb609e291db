// Package client is the public Go SDK of sandlot's HTTP API.
//
//	c := client.New("http://127.0.0.1:7423", client.WithAPIKey(os.Getenv("SANDLOT_API_KEY")))
//	res, err := c.RunCode(ctx, client.RunCodeRequest{
//		Target: client.Target{ConversationID: "c1"}, Language: "python", Code: "1+1"})
//	if client.IsNotFound(err) { ... }
//
// Every method takes a context and returns errors that wrap *api.Error
// (the server's {code, message}); the Is* helpers test its category.
//
// The package links api (the wire types) and errdefs (the error codes)
// and nothing else of sandlot; a test in this package keeps it that way.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// Client talks to one sandlot server. It is safe for concurrent use.
type Client struct {
	base   string
	err    error // from New: reported by every call
	key    string
	hc     *http.Client
	agent  string
	header http.Header
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sets the tenant API key (sent as Authorization: Bearer).
func WithAPIKey(key string) Option { return func(c *Client) { c.key = key } }

// WithHTTPClient replaces http.DefaultClient. Streaming calls need a client
// without an overall Timeout; use contexts for deadlines instead.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.hc = h } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// WithHeader adds a header to every request (a request id, a proxy token).
func WithHeader(key, value string) Option {
	return func(c *Client) { c.header.Add(key, value) }
}

// New returns a client for the server at baseURL (e.g.
// "http://127.0.0.1:7423"). A malformed baseURL is reported by every call.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: http.DefaultClient, agent: "sandlot-go", header: http.Header{}}
	if u, err := url.Parse(c.base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.err = fmt.Errorf("client: base URL %q must be http(s)://host[:port]: %w", baseURL, errdefs.ErrInvalidArgument)
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Target names the context a call runs in. PathID defaults to "main";
// TaskID stands in for a missing ConversationID; with neither the server
// generates a conversation id and returns it in the result. UserID,
// optional, is the end user behind the tenant's key: part of the
// context's key, so two users who name the same conversation or task get
// two sandboxes.
type Target struct {
	UserID         string
	ConversationID string
	PathID         string
	TaskID         string
	// Network is the network the context should have (api.ToolRequest's
	// network); nil: loopback only, or what the context already has.
	Network *api.Network
	// Secrets are environment variables whose values the guard masks in
	// everything the context returns (api.ToolRequest's secrets).
	Secrets map[string]string
}

// FileTarget names the context of a file call: ContextID, or else the
// active context of (UserID, ConversationID, PathID), created when absent.
type FileTarget struct {
	ContextID      string
	UserID         string // optional; with ContextID it is not used
	ConversationID string
	PathID         string // default "main"
}

// query is q with the target's user, when it names its context by
// conversation and has one.
func (f FileTarget) query(q url.Values) url.Values {
	if f.ContextID == "" && f.UserID != "" {
		if q == nil {
			q = url.Values{}
		}
		q.Set("userId", f.UserID)
	}
	return q
}

func (f FileTarget) prefix() (string, error) {
	if f.ContextID != "" {
		return "/v1/contexts/" + url.PathEscape(f.ContextID), nil
	}
	if f.ConversationID == "" {
		return "", fmt.Errorf("file target needs a context id or a conversation id: %w", errdefs.ErrInvalidArgument)
	}
	p := f.PathID
	if p == "" {
		p = api.DefaultPathID
	}
	return "/v1/conversations/" + url.PathEscape(f.ConversationID) + "/paths/" + url.PathEscape(p), nil
}

// RunCodeRequest is a run_code call.
type RunCodeRequest struct {
	Target
	Language string        // python | javascript | typescript | bash | sh
	Code     string        // at most 100 KB
	Timeout  time.Duration // 0: the server default; else 1 s to 600 s
	// Template (name or id) when the call creates the context; "": the
	// default. A context keeps its template.
	Template string
	// Env holds environment variables for this run only.
	Env map[string]string
}

func (r RunCodeRequest) args() api.RunCodeArgs {
	return api.RunCodeArgs{Language: r.Language, Code: r.Code, Timeout: r.Timeout.Milliseconds(), Template: r.Template, Env: r.Env}
}

// RunCode runs code in the target's persistent kernel.
func (c *Client) RunCode(ctx context.Context, req RunCodeRequest) (*api.RunCodeResult, error) {
	var res api.RunCodeResult
	if err := c.Tool(ctx, "run_code", req.Target, req.args(), &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RunCodeStream is RunCode with output delivered to fn as it happens
// (stdout, stderr and result events, in order). An error from fn stops
// the call.
func (c *Client) RunCodeStream(ctx context.Context, req RunCodeRequest, fn func(api.Event) error) (*api.RunCodeResult, error) {
	var res api.RunCodeResult
	if err := c.ToolStream(ctx, "run_code", req.Target, req.args(), fn, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Tool calls a tool by name with args (any JSON-encodable value) and
// decodes its result into out (nil discards it).
func (c *Client) Tool(ctx context.Context, name string, t Target, args, out any) error {
	body, err := toolBody(t, args)
	if err != nil {
		return err
	}
	return c.do(ctx, "POST", "/v1/tools/"+url.PathEscape(name), nil, body, api.ContentTypeJSON, out)
}

func toolBody(t Target, args any) ([]byte, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode args: %w", err)
	}
	if string(raw) == "null" {
		raw = nil
	}
	return json.Marshal(api.ToolRequest{UserID: t.UserID, ConversationID: t.ConversationID, PathID: t.PathID, TaskID: t.TaskID, Args: raw, Network: t.Network, Secrets: t.Secrets})
}

// ToolStream calls a tool with Accept: application/x-ndjson. fn (may be
// nil) gets every stdout, stderr and result event; the final event's
// result is decoded into out.
func (c *Client) ToolStream(ctx context.Context, name string, t Target, args any, fn func(api.Event) error, out any) error {
	for ev, err := range c.ToolEvents(ctx, name, t, args) {
		if err != nil {
			return err
		}
		if ev.Type == api.EventFinal {
			if out != nil {
				if err := json.Unmarshal(ev.Result, out); err != nil {
					return fmt.Errorf("decode result: %w", err)
				}
			}
			return nil
		}
		if fn != nil {
			if err := fn(ev); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("stream ended without a final event: %w", errdefs.ErrUnavailable)
}

// ToolEvents calls a tool with Accept: application/x-ndjson and yields its
// events as they arrive: stdout, stderr and result events, then one final
// event whose Result is the tool's result. A failure (before or during the
// stream, including an error event) is yielded as an error, last.
// Breaking out of the loop cancels the call's response.
func (c *Client) ToolEvents(ctx context.Context, name string, t Target, args any) iter.Seq2[api.Event, error] {
	return func(yield func(api.Event, error) bool) {
		body, err := toolBody(t, args)
		if err != nil {
			yield(api.Event{}, err)
			return
		}
		req, err := c.request(ctx, "POST", "/v1/tools/"+url.PathEscape(name), nil, bytes.NewReader(body), api.ContentTypeJSON)
		if err != nil {
			yield(api.Event{}, err)
			return
		}
		req.Header.Set("Accept", api.ContentTypeNDJSON)
		resp, err := c.send(req)
		if err != nil {
			yield(api.Event{}, err)
			return
		}
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), api.ContentTypeNDJSON) {
			// A server that does not stream answers with the plain result.
			var res json.RawMessage
			if err := decodeInto(resp, &res); err != nil {
				yield(api.Event{}, err)
				return
			}
			yield(api.Event{Type: api.EventFinal, Result: res}, nil)
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var ev api.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				yield(api.Event{}, fmt.Errorf("decode event: %w", err))
				return
			}
			if ev.Type == api.EventError {
				yield(api.Event{}, &api.Error{Code: ev.Code, Message: ev.Message})
				return
			}
			if !yield(ev, nil) || ev.Type == api.EventFinal {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(api.Event{}, fmt.Errorf("read stream: %w", err))
			return
		}
		yield(api.Event{}, fmt.Errorf("stream ended without a final event: %w", errdefs.ErrUnavailable))
	}
}

// Tools returns the tool schemas in a format: "openai", "anthropic",
// "mcp", or "" for the registry's own.
func (c *Client) Tools(ctx context.Context, format string) (json.RawMessage, error) {
	var out json.RawMessage
	q := url.Values{}
	if format != "" {
		q.Set("format", format)
	}
	err := c.do(ctx, "GET", "/v1/tools", q, nil, "", &out)
	return out, err
}

// ListOptions filters ListContexts. Status takes creating, ready,
// terminated, error or active.
type ListOptions struct {
	UserID         string // only this end user's contexts; "": every user's
	ConversationID string
	PathID         string
	Status         []string
	Limit          int
	After          string
}

// ListContexts returns one page of the tenant's contexts; pass the
// returned Next as After for the next page.
func (c *Client) ListContexts(ctx context.Context, o ListOptions) (*api.ContextList, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("userId", o.UserID)
	set("conversationId", o.ConversationID)
	set("pathId", o.PathID)
	set("status", strings.Join(o.Status, ","))
	set("after", o.After)
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var out api.ContextList
	if err := c.do(ctx, "GET", "/v1/contexts", q, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetContext returns one context by id.
func (c *Client) GetContext(ctx context.Context, id string) (*api.Context, error) {
	var out api.Context
	if err := c.do(ctx, "GET", "/v1/contexts/"+url.PathEscape(id), nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteContext terminates a context (its record stays, for audit).
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/contexts/"+url.PathEscape(id), nil, nil, "", nil)
}

// EndConversation terminates the contexts of every path of a conversation
// (reason deleted) and returns how many it ended.
func (c *Client) EndConversation(ctx context.Context, conversationID string) (int, error) {
	return c.EndUserConversation(ctx, "", conversationID)
}

// EndUserConversation is EndConversation of one end user's conversation
// ("" is no user): another user's conversation of the same id stays.
func (c *Client) EndUserConversation(ctx context.Context, userID, conversationID string) (int, error) {
	var out api.ConversationEnded
	if err := c.do(ctx, "DELETE", "/v1/conversations/"+url.PathEscape(conversationID), FileTarget{UserID: userID}.query(nil), nil, "", &out); err != nil {
		return 0, err
	}
	return out.Terminated, nil
}

// PathEvent reports a conversation path event (branched, edited, merged,
// deleted, archived).
func (c *Client) PathEvent(ctx context.Context, conversationID, pathID string, ev api.PathEvent) error {
	return c.UserPathEvent(ctx, "", conversationID, pathID, ev)
}

// UserPathEvent is PathEvent on one end user's conversation ("" is no
// user).
func (c *Client) UserPathEvent(ctx context.Context, userID, conversationID, pathID string, ev api.PathEvent) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	p := "/v1/conversations/" + url.PathEscape(conversationID) + "/paths/" + url.PathEscape(pathID) + "/events"
	return c.do(ctx, "POST", p, FileTarget{UserID: userID}.query(nil), body, api.ContentTypeJSON, nil)
}

// Upload streams r into the file at path (relative paths resolve against
// /home/user) and returns the written file's info.
func (c *Client) Upload(ctx context.Context, t FileTarget, path string, r io.Reader) (*api.FileInfo, error) {
	prefix, err := t.prefix()
	if err != nil {
		return nil, err
	}
	return sendBody[api.FileInfo](ctx, c, "PUT", prefix+"/files", t.query(url.Values{"path": {path}}), r, "application/octet-stream")
}

// sendBody sends body (of type ctype) to path and decodes the answer into
// a T.
func sendBody[T any](ctx context.Context, c *Client, method, path string, q url.Values, body io.Reader, ctype string) (*T, error) {
	req, err := c.request(ctx, method, path, q, body, ctype)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out T
	if err := decodeInto(resp, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Download streams the file at path into w and returns the bytes written.
// size, when not nil, is called once with the file's size in the sandbox
// before the bytes flow (for progress; the guard may change the count).
func (c *Client) Download(ctx context.Context, t FileTarget, path string, w io.Writer, size func(int64)) (int64, error) {
	prefix, err := t.prefix()
	if err != nil {
		return 0, err
	}
	req, err := c.request(ctx, "GET", prefix+"/files", t.query(url.Values{"path": {path}}), nil, "")
	if err != nil {
		return 0, err
	}
	resp, err := c.send(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if size != nil {
		if n, err := strconv.ParseInt(resp.Header.Get("X-File-Size"), 10, 64); err == nil {
			size(n)
		}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("download %s: %w", path, err)
	}
	return n, nil
}

// ListFiles lists a directory ("" is /home/user) to depth (0 means 1).
func (c *Client) ListFiles(ctx context.Context, t FileTarget, path string, depth int) (*api.FileList, error) {
	prefix, err := t.prefix()
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out api.FileList
	if err := c.do(ctx, "GET", prefix+"/files/list", t.query(q), nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SessionMetrics returns the context counters, in total and per template.
func (c *Client) SessionMetrics(ctx context.Context) (*api.SessionMetrics, error) {
	var out api.SessionMetrics
	if err := c.do(ctx, "GET", "/v1/metrics/sessions", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Audit returns the caller's audit trail, newest first: guard findings
// (kind "guard.finding", detail type, mode, start, end and hmac; never the
// value) and tenant changes. kind "" means every kind; limit 0 means the
// server's default (100).
func (c *Client) Audit(ctx context.Context, kind string, limit int) (*api.AuditList, error) {
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out api.AuditList
	if err := c.do(ctx, "GET", "/v1/audit", q, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ready returns nil when the server answers /readyz with 200.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, "GET", "/readyz", nil, nil, "", nil)
}

// Version returns the server's build: version, commit and the store
// schema it knows (GET /v1/version).
func (c *Client) Version(ctx context.Context) (*api.Version, error) {
	var out api.Version
	if err := c.do(ctx, "GET", "/v1/version", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tenant returns the tenant of the client's key (GET /v1/tenant).
func (c *Client) Tenant(ctx context.Context) (*api.TenantInfo, error) {
	var out api.TenantInfo
	if err := c.do(ctx, "GET", "/v1/tenant", nil, nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Readiness returns the server's readiness (GET /readyz), ready or not:
// a 503 whose body is a readiness report is an answer, with Ready false
// and what the server waits for. An error means no report: the server
// did not answer (unavailable), or answered something else.
func (c *Client) Readiness(ctx context.Context) (*api.Readiness, error) {
	req, err := c.request(ctx, "GET", "/readyz", nil, nil, "")
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("GET /readyz: %w", ctxErr)
		}
		return nil, fmt.Errorf("GET /readyz: %w: %w", err, errdefs.ErrUnavailable)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, errorFrom(resp)
	}
	var out api.Readiness
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil || out.Status == "" {
		return nil, fmt.Errorf("GET /readyz: HTTP %d without a readiness report: %w", resp.StatusCode, errdefs.ErrUnavailable)
	}
	return &out, nil
}
