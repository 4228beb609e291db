// Package mcp serves the tool registry over the Model Context Protocol,
// with the official Go SDK: stdio for `sandlot mcp` and streamable HTTP at
// /mcp inside `sandlot serve`.
//
// Identity of a call: the tenant comes from the authenticated HTTP request
// (every request, not only the one that opened the session) or, over
// stdio, from Config.Tenant. The conversation defaults to the MCP session
// (its id over HTTP, a UUID per connection over stdio) and the path to
// "main". A call may name others: the tools' MCP schemas carry two extra
// optional properties, conversationId and pathId, which are removed from
// the arguments before the registry validates them.
//
// Results are returned twice, as the MCP spec suggests: as text content
// holding the JSON and as structured content. Registry errors become tool
// errors (isError) carrying errdefs.PublicMessage, so internals never leak.
package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// tenantHeader carries the authenticated tenant from HTTPHandler to the
// tool handlers (the SDK hands handlers the request headers). HTTPHandler
// always overwrites it, so a client cannot set it.
const tenantHeader = "X-Sandlot-Internal-Tenant"

// maxRequestBody bounds one MCP HTTP request.
const maxRequestBody = 32 << 20

// Identity argument names accepted in every tool's MCP arguments.
const (
	ArgConversationID = "conversationId"
	ArgPathID         = "pathId"
	ArgTaskID         = "taskId"
)

// identityArgs are the arguments every tool takes over MCP besides its own.
var identityArgs = []string{ArgConversationID, ArgPathID, ArgTaskID}

// MetaNetwork is the key of a tool call's _meta that holds the network the
// call's context should have (api.Network, as in POST /v1/tools/{name}).
// It is in _meta, set by the client application, and not among the
// arguments, so a model does not choose its own network.
const MetaNetwork = "sandlot.dev/network"

// callNetwork reads req's _meta network; nil when absent.
func callNetwork(req *sdk.CallToolRequest) (*policy.Policy, error) {
	v, ok := req.Params.GetMeta()[MetaNetwork]
	if !ok || v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("_meta %s: %v: %w", MetaNetwork, err, errdefs.ErrInvalidArgument)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var n api.Network
	if err := dec.Decode(&n); err != nil {
		return nil, fmt.Errorf("_meta %s is not a network (mode, allow, deny, headers, ingress, secrets): %v: %w", MetaNetwork, err, errdefs.ErrInvalidArgument)
	}
	return tools.NetworkPolicy(&n)
}

// MetaSecrets is the key of a tool call's _meta that holds the caller's
// declared secrets (name to value, as api.ToolRequest.Secrets): injected
// as environment variables of the code tools, and masked by the guard in
// all that leaves the context. Like the network, the client application
// sets them, so the model never sees a value.
const MetaSecrets = "sandlot.dev/secrets"

// callSecrets reads req's _meta secrets, checked by contexts.CheckEnv;
// nil when absent.
func callSecrets(req *sdk.CallToolRequest) (map[string]string, error) {
	v, ok := req.Params.GetMeta()[MetaSecrets]
	if !ok || v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("_meta %s: %v: %w", MetaSecrets, err, errdefs.ErrInvalidArgument)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("_meta %s must map names to string values: %w", MetaSecrets, errdefs.ErrInvalidArgument)
	}
	if err := contexts.CheckEnv(nil, m); err != nil {
		return nil, fmt.Errorf("_meta %s: %w", MetaSecrets, err)
	}
	return m, nil
}

// MetaUser is the key of a tool call's _meta that names the end user the
// call is made for (a string; "" is no user): part of the context's key,
// so two users behind one tenant who name the same conversation get two
// sandboxes. It is in _meta, set by the client application, and not among
// the arguments: a model never chooses whose sandbox it works in.
const MetaUser = "sandlot.dev/user"

// callUser reads req's _meta user, checked like every identity part;
// def when absent.
func callUser(req *sdk.CallToolRequest, def string) (string, error) {
	v, ok := req.Params.GetMeta()[MetaUser]
	if !ok || v == nil {
		return def, nil
	}
	u, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("_meta %s must be a string: %w", MetaUser, errdefs.ErrInvalidArgument)
	}
	if err := contexts.CheckIDPart("_meta "+MetaUser, u); err != nil {
		return "", err
	}
	return u, nil
}

// Tenants finds a tenant by id; *tenant.Authenticator implements it, with
// the cache every edge shares.
type Tenants interface {
	Tenant(ctx context.Context, id string) (*tenant.Tenant, error)
}

// Config tunes a Server. Zero values are documented per field.
type Config struct {
	// Tenants resolves the tenant of a call, which the call's context
	// then carries (tenant.With), so the guard applies the tenant's mode
	// without a lookup of its own. A tenant that no longer exists is
	// unauthenticated. Nil: the context is scoped by tenant id only.
	Tenants Tenants
	// Tenant is the tenant of sessions without HTTP authentication
	// (stdio, in-memory). Empty: such calls fail.
	Tenant string
	// Conversation is the default conversation of sessions without a
	// session id (stdio, in-memory). Empty: a UUID per session.
	Conversation string
	// User is the end user of calls whose _meta names none (MetaUser).
	// Empty: no user.
	User string
	// Name and Version are reported to clients. "": "sandlot", "dev".
	Name, Version string
	// SessionTimeout closes idle HTTP sessions. 0: 30 minutes.
	SessionTimeout time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

// Server is an MCP server over a tool registry. It is safe for concurrent
// use; one Server serves any number of sessions on any transports.
//
// Each session gets an SDK server of its own (session.go), so that its
// tool list can change on its own: after a call of the session failed to
// create its sandbox, the code tools are withdrawn from that session for a
// cool-off (tools.Registry.ToolsFor), and only its client is sent
// notifications/tools/list_changed.
type Server struct {
	reg   *tools.Registry
	cfg   Config
	log   *slog.Logger
	tools []*sdk.Tool // the registry's tools with the identity arguments
	// probe answers the HTTP transport's questions about the server
	// (the protocol versions) on requests of sessions that exist.
	probe *sdk.Server

	mu    sync.Mutex
	convs map[*sdk.ServerSession]string // conversation ids of sessions without an id (stdio)
}

// New returns a server exposing every tool of reg.
func New(reg *tools.Registry, cfg Config) *Server {
	if cfg.Name == "" {
		cfg.Name = "sandlot"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{reg: reg, cfg: cfg, log: log, convs: map[*sdk.ServerSession]string{}}
	for _, t := range reg.Tools() {
		s.tools = append(s.tools, &sdk.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: withIdentityArgs(t.InputSchema),
		})
	}
	s.probe = s.newSession().srv
	return s
}

// Instructions is what the server tells a client about its tools when a
// session starts: the sandbox per conversation path, what survives between
// calls and what ends it, and the withdrawal of the code tools after a
// sandbox could not be created.
func (s *Server) Instructions() string {
	text := "Tools run in an isolated sandbox per conversation path (this session's conversation unless a call " +
		"names a conversationId or taskId; path main unless it names a pathId), with no network access unless the " +
		"client application gave the conversation one. " + s.reg.Lifecycle()
	if d := s.reg.Cooloff(); d > 0 {
		text += " When the sandbox cannot be created, the tools that run in it are withdrawn from this session for " +
			d.String() + " (the tool list changes, and a call answers the creation failure at once); then they come back."
	}
	return text
}

// withIdentityArgs adds the optional conversationId and pathId properties
// to a tool's input schema.
func withIdentityArgs(schema json.RawMessage) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil {
		panic(fmt.Sprintf("mcp: tool schema: %v", err)) // registry schemas are embedded and tested
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		m["properties"] = props
	}
	props[ArgConversationID] = map[string]any{"type": "string", "minLength": 1, "maxLength": 256,
		"description": "Conversation whose sandbox to use (default: this MCP session)."}
	props[ArgPathID] = map[string]any{"type": "string", "minLength": 1, "maxLength": 256,
		"description": "Path (branch) of the conversation (default: main)."}
	props[ArgTaskID] = map[string]any{"type": "string", "minLength": 1, "maxLength": 256,
		"description": "Task whose sandbox to use; when given it keys the sandbox instead of conversationId."}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("mcp: tool schema: %v", err))
	}
	return b
}

// Run serves one session on t until the client disconnects or ctx ends.
// Calls are made for Config.Tenant.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.newSession().srv.Run(ctx, t)
}

// ServeStdio serves one session on stdin/stdout.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.Run(ctx, &sdk.StdioTransport{})
}

// HTTPHandler serves streamable HTTP. auth authenticates every request
// and returns its tenant; an error answers with the error's HTTP status
// (errdefs) and its public message.
func (s *Server) HTTPHandler(auth func(r *http.Request) (tenantID string, err error)) http.Handler {
	h := sdk.NewStreamableHTTPHandler(s.serverFor, &sdk.StreamableHTTPOptions{
		SessionTimeout: s.cfg.SessionTimeout,
		Logger:         s.log,
		// write_file takes up to 10 MiB of content; leave room for JSON escaping.
		MaxRequestBodyBytes: maxRequestBody,
		// The SDK's DNS-rebinding guard rejects a loopback request whose
		// Host is not loopback, which breaks a reverse proxy in front of
		// the daemon. Every request here carries an API key that a
		// rebinding page cannot know, so the guard adds nothing.
		DisableLocalhostProtection: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenantID, err := auth(r)
		if err == nil && tenantID == "" {
			err = fmt.Errorf("no tenant: %w", errdefs.ErrUnauthenticated)
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(errdefs.HTTPStatus(err))
			json.NewEncoder(w).Encode(map[string]string{"code": string(errdefs.CodeOf(err)), "message": guard.SanitizeError(errdefs.PublicMessage(err))})
			return
		}
		r.Header.Del(tenantHeader)
		r.Header.Set(tenantHeader, tenantID)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), lazyKey{}, &lazySession{s: s})))
	})
}

func (s *Server) handler(sess *session, name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		id, args, err := s.identity(req)
		if err != nil {
			return toolError(err), nil
		}
		if ctx, err = s.withTenant(ctx, id.TenantID); err != nil {
			return toolError(err), nil
		}
		netPolicy, err := callNetwork(req)
		if err != nil {
			return toolError(err), nil
		}
		secrets, err := callSecrets(req)
		if err != nil {
			return toolError(err), nil
		}
		ctx = contexts.WithSecrets(ctx, secrets)
		out, stop := progress(ctx, req)
		res, err := s.reg.Call(ctx, tools.Call{Name: name, Identity: id, Args: args, Network: netPolicy, EdgeArgs: identityArgs, Request: sess.request}, out)
		stop()
		sess.check()
		if err != nil {
			if !errdefs.IsClientFault(err) {
				s.log.ErrorContext(ctx, "mcp tool call failed", logkey.Tool, name, logkey.Tenant, id.TenantID, logkey.Err, err)
			}
			return toolError(err), nil
		}
		b, err := json.Marshal(res)
		if err != nil {
			s.log.ErrorContext(ctx, "mcp tool result", logkey.Tool, name, logkey.Err, err)
			return toolError(err), nil
		}
		return &sdk.CallToolResult{
			Content:           content(res, b),
			StructuredContent: json.RawMessage(b),
		}, nil
	}
}

// content is the unstructured form of a result: its JSON, except that
// figures (PNG/JPEG results of run_code) become image content, and their
// base64 in the text is replaced by a note, so a model sees the picture
// rather than a wall of base64. The structured content keeps everything.
func content(res any, full []byte) []sdk.Content {
	if shot, ok := res.(*tools.ScreenshotResult); ok {
		// A desktop screenshot: the picture, and its size as text.
		if raw, err := base64.StdEncoding.DecodeString(shot.PNG); err == nil {
			return []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(`{"width":%d,"height":%d,"png":"[image/png: image content 1]"}`, shot.Width, shot.Height)},
				&sdk.ImageContent{Data: raw, MIMEType: "image/png"}}
		}
	}
	rc, ok := res.(*tools.RunCodeResult)
	if !ok {
		return []sdk.Content{&sdk.TextContent{Text: string(full)}}
	}
	var images []sdk.Content
	slim := *rc
	slim.Results = make([]api.RichResult, len(rc.Results))
	for i, rr := range rc.Results {
		for _, img := range []struct {
			data *string
			mime string
		}{{&rr.PNG, "image/png"}, {&rr.JPEG, "image/jpeg"}} {
			if *img.data == "" {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(*img.data)
			if err != nil {
				continue
			}
			images = append(images, &sdk.ImageContent{Data: raw, MIMEType: img.mime})
			*img.data = fmt.Sprintf("[%s: image content %d]", img.mime, len(images))
		}
		slim.Results[i] = rr
	}
	if len(images) == 0 {
		return []sdk.Content{&sdk.TextContent{Text: string(full)}}
	}
	b, err := json.Marshal(slim)
	if err != nil {
		b = full
	}
	return append([]sdk.Content{&sdk.TextContent{Text: string(b)}}, images...)
}

// maxProgressQueue bounds the output chunks waiting to be sent as
// progress; beyond it chunks are dropped (the result has all the output).
const maxProgressQueue = 256

// progress streams a call's (guarded) stdout and stderr to the client as
// progress notifications when the request carries a progress token. The
// returned func is nil otherwise. stop must be called when the call ends;
// it waits for the queued notifications.
func progress(ctx context.Context, req *sdk.CallToolRequest) (out contexts.OutputFunc, stop func()) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil, func() {}
	}
	var mu sync.Mutex
	closed := false
	ch := make(chan string, maxProgressQueue)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for msg := range ch {
			n++
			// Best effort: a client that went away only loses progress.
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n), Message: msg})
		}
	}()
	out = func(ev agent.OutputEvent) {
		if (ev.Stream != agent.Stdout && ev.Stream != agent.Stderr) || ev.Data == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		select {
		case ch <- ev.Data:
		default: // never block the sandbox connection
		}
	}
	stop = func() {
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
		<-done
	}
	return out, stop
}

func toolError(err error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: guard.SanitizeError(errdefs.PublicMessage(err))}}}
}

// identity resolves the call's identity and returns the arguments without
// the identity fields.
func (s *Server) identity(req *sdk.CallToolRequest) (contexts.Identity, json.RawMessage, error) {
	var id contexts.Identity
	if req.Extra != nil && req.Extra.Header != nil {
		// HTTP: only the header HTTPHandler set counts.
		id.TenantID = req.Extra.Header.Get(tenantHeader)
	} else {
		id.TenantID = s.cfg.Tenant
	}
	if id.TenantID == "" {
		return id, nil, fmt.Errorf("no tenant for this MCP session: %w", errdefs.ErrUnauthenticated)
	}
	var err error
	if id.UserID, err = callUser(req, s.cfg.User); err != nil {
		return id, nil, err
	}
	args := req.Params.Arguments
	if t := bytes.TrimSpace(args); len(t) > 0 && t[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(args, &m); err != nil {
			return id, nil, fmt.Errorf("%s: the arguments are not valid JSON: %w", req.Params.Name, errdefs.ErrInvalidArgument)
		}
		var task string
		for key, dst := range map[string]*string{ArgConversationID: &id.ConversationID, ArgPathID: &id.PathID, ArgTaskID: &task} {
			raw, ok := m[key]
			if !ok {
				continue
			}
			if err := json.Unmarshal(raw, dst); err != nil || *dst == "" || len(*dst) > 256 {
				return id, nil, fmt.Errorf("%s must be a non-empty string of at most 256 characters: %w", key, errdefs.ErrInvalidArgument)
			}
			delete(m, key)
		}
		if args, err = json.Marshal(m); err != nil {
			return id, nil, errors.Join(err, errdefs.ErrInvalidArgument)
		}
		if task != "" { // the session-reuse order: task, conversation, session
			id.ConversationID = task
		}
	}
	if id.ConversationID == "" {
		id.ConversationID = s.sessionConversation(req.Session)
	}
	if id.PathID == "" {
		id.PathID = contexts.DefaultPath
	}
	return id, args, nil
}

// withTenant returns ctx carrying the call's tenant.
func (s *Server) withTenant(ctx context.Context, id string) (context.Context, error) {
	if s.cfg.Tenants == nil {
		return tenant.WithID(ctx, id), nil
	}
	t, err := s.cfg.Tenants.Tenant(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("tenant %s no longer exists: %w", id, errdefs.ErrUnauthenticated)
	}
	if err != nil {
		return nil, fmt.Errorf("look up tenant %s: %w", id, err)
	}
	return tenant.With(ctx, t), nil
}

// sessionConversation is the session's id, or a UUID kept for the life of
// a session that has none (stdio, in-memory).
func (s *Server) sessionConversation(ss *sdk.ServerSession) string {
	if id := ss.ID(); id != "" {
		return id
	}
	if s.cfg.Conversation != "" {
		return s.cfg.Conversation
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.convs[ss]; ok {
		return c
	}
	c := uuid.NewString()
	s.convs[ss] = c
	go func() {
		ss.Wait()
		s.mu.Lock()
		delete(s.convs, ss)
		s.mu.Unlock()
	}()
	return c
}
