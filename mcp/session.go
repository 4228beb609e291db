package mcp

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is the SDK server of one MCP session and what the session's tool
// list depends on: the registry withdraws the code tools from a request
// (here, the session) after one of its calls failed to create its
// sandbox. The session's tools/list then leaves them out, and its client
// alone is told the list changed, when the withdrawal starts and when it
// ends.
type session struct {
	s       *Server
	srv     *sdk.Server
	request string // tools.Call.Request: unique to this session, never the client's to choose

	mu    sync.Mutex
	until time.Time   // the withdrawal the client was told of
	timer *time.Timer // tells the client when it ends
}

// newSession builds the SDK server of one session.
func (s *Server) newSession() *session {
	sess := &session{s: s, request: "mcp:" + uuid.NewString()}
	sess.srv = sdk.NewServer(&sdk.Implementation{Name: s.cfg.Name, Version: s.cfg.Version}, &sdk.ServerOptions{
		Instructions: s.Instructions(),
		Capabilities: &sdk.ServerCapabilities{},
	})
	for _, t := range s.tools {
		sess.srv.AddTool(t, s.handler(sess, t.Name))
	}
	sess.srv.AddReceivingMiddleware(sess.filterList)
	return sess
}

// filterList leaves the withdrawn tools out of the session's tools/list.
func (sess *session) filterList(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		lr, ok := res.(*sdk.ListToolsResult)
		if err != nil || method != "tools/list" || !ok || sess.s.reg.WithdrawnUntil(sess.request).IsZero() {
			return res, err
		}
		offered := map[string]bool{}
		for _, t := range sess.s.reg.ToolsFor(sess.request) {
			offered[t.Name] = true
		}
		out := *lr
		out.Tools = nil
		for _, t := range lr.Tools {
			if offered[t.Name] {
				out.Tools = append(out.Tools, t)
			}
		}
		if out.Tools == nil {
			out.Tools = []*sdk.Tool{}
		}
		return &out, nil
	}
}

// check tells the client when a call of this session has just withdrawn
// its code tools, and arranges to tell it again when they come back.
func (sess *session) check() {
	until := sess.s.reg.WithdrawnUntil(sess.request)
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if until.IsZero() || until.Equal(sess.until) {
		return
	}
	sess.until = until
	sess.listChanged()
	if sess.timer != nil {
		sess.timer.Stop()
	}
	sess.timer = time.AfterFunc(time.Until(until), func() {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		sess.listChanged()
	})
}

// listChanged has the SDK send notifications/tools/list_changed to this
// session's client (the only session of its server): adding a tool that
// is there already counts as a change. Precondition: sess.mu held.
func (sess *session) listChanged() {
	if len(sess.s.tools) == 0 {
		return
	}
	t := sess.s.tools[0]
	sess.srv.AddTool(t, sess.s.handler(sess, t.Name))
}

// lazyKey carries, in an HTTP request's context, the session a new MCP
// session of that request gets: the SDK asks for the server more than
// once per request, and one session must come of it.
type lazyKey struct{}

type lazySession struct {
	s    *Server
	once sync.Once
	srv  *sdk.Server
}

// serverFor is the SDK's getServer: a new session's own server for a
// request that opens one (no Mcp-Session-Id), the probe for the others
// (the SDK then only reads its protocol versions; the session's own server
// serves the request).
func (s *Server) serverFor(r *http.Request) *sdk.Server {
	l, ok := r.Context().Value(lazyKey{}).(*lazySession)
	if !ok || r.Header.Get("Mcp-Session-Id") != "" {
		return s.probe
	}
	l.once.Do(func() { l.srv = s.newSession().srv })
	return l.srv
}
