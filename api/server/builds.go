package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
)

// Builds is the daemon's build queue (*builds.Queue, shared with the E2B
// wire's Template.build, so its limits hold across both).
type Builds interface {
	Request(ctx context.Context, tenantID string, req builds.Request) (*builds.Build, error)
	Unpack(ctx context.Context, b *builds.Build, r io.Reader) error
	Start(ctx context.Context, b *builds.Build, rec *recipe.Recipe) error
	CheckFrom(ctx context.Context, tenantID string, rec *recipe.Recipe) error
	Abort(b *builds.Build, reason string)
	Get(tenantID, id string) (*builds.Build, error)
	MaxUploadBytes() int64
}

var _ Builds = (*builds.Queue)(nil)

// maxDockerfileBytes bounds the Dockerfile read from a build context.
const maxDockerfileBytes = 1 << 20

// buildRoute is the one route that takes a compressed body
// (Content-Encoding gzip): a build context is commonly a .tar.gz.
func buildRoute(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/v1/templates/builds"
}

func gzipEncoding(enc string) bool {
	enc = strings.TrimSpace(enc)
	return strings.EqualFold(enc, "gzip") || strings.EqualFold(enc, "x-gzip")
}

// buildTemplate starts a build of one of the tenant's templates: a
// Dockerfile in a build context (the body is its tarball, gzip or not) or
// a Dockerfile alone (a JSON body). It answers 202 once the build is
// queued; GET /v1/templates/builds/{buildId} follows it.
func (s *Server) buildTemplate(w http.ResponseWriter, r *http.Request) {
	q := s.cfg.Builds
	if q == nil {
		s.writeError(w, r, fmt.Errorf("template builds are not enabled on this server (they need local sandboxes on an image store): %w", errdefs.ErrFailedPrecondition))
		return
	}
	req, err := s.buildRequest(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	max := q.MaxUploadBytes()
	if req.withContext && r.ContentLength > max {
		s.writeError(w, r, &http.MaxBytesError{Limit: max})
		return
	}
	// The lease keeps GC (which empties the store's tmp/) off the context
	// until the build ends.
	b, err := q.Request(r.Context(), mustTenant(r).ID, builds.Request{Spec: templates.BuildSpec{Name: req.name, Source: "build"}, Settings: req.settings, Lease: true})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Until the build starts, any way out (a refused body, a panic) aborts
	// it and its staging goes.
	started, reason := false, "the build request ended before the build started"
	defer func() {
		if !started {
			q.Abort(b, reason)
		}
	}()
	rec := req.recipe
	if req.withContext {
		if rec, err = s.unpackContext(r.Context(), q, b, http.MaxBytesReader(w, r.Body, max), req.dockerfile, req.args); err != nil {
			reason = errdefs.PublicMessage(err)
			s.writeBuildError(w, r, err)
			return
		}
	}
	// A FROM that is none of the tenant's templates and nothing the build
	// may pull is a 404 now rather than a failed build later; the store's
	// names and digests are never asked (builds.Queue.CheckFrom).
	if err := q.CheckFrom(r.Context(), mustTenant(r).ID, rec); err != nil {
		reason = errdefs.PublicMessage(err)
		s.writeError(w, r, err)
		return
	}
	// The answer is the build as queued (waiting): once started it may
	// already be building, which a status call shows.
	out := buildOut(b, 0)
	if err := q.Start(r.Context(), b, rec); err != nil {
		reason = errdefs.PublicMessage(err)
		s.writeError(w, r, err)
		return
	}
	started = true
	writeJSON(w, http.StatusAccepted, out)
}

// buildReq is a build request as read from the HTTP request: a context
// to come (its Dockerfile's path and build args), or the recipe of a
// Dockerfile sent alone.
type buildReq struct {
	name        string
	settings    templates.Settings
	withContext bool
	dockerfile  string            // withContext: its path in the context
	args        map[string]string // withContext: the build args
	recipe      *recipe.Recipe    // without a context
}

// buildRequest reads and checks what a build asks for, before anything is
// queued or the body (a context) is read.
func (s *Server) buildRequest(w http.ResponseWriter, r *http.Request) (buildReq, error) {
	var (
		req      buildReq
		text     string // the JSON body's Dockerfile
		args     map[string]string
		settings api.TemplateSettings
	)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json", "":
		var body api.TemplateBuildRequest
		if err := s.decodeJSON(w, r, &body); err != nil {
			return req, err
		}
		if strings.TrimSpace(body.Dockerfile) == "" {
			return req, fmt.Errorf("dockerfile is required (its text; to build with a context, send the context's tarball as application/x-tar): %w", errdefs.ErrInvalidArgument)
		}
		req.name, text, args, settings = body.Name, body.Dockerfile, body.BuildArgs, body.Settings
	case "application/x-tar", "application/gzip", "application/x-gzip", "application/octet-stream":
		req.withContext = true
		qv := r.URL.Query()
		req.name, req.dockerfile = qv.Get("name"), qv.Get("dockerfile")
		if req.dockerfile == "" {
			req.dockerfile = "Dockerfile"
		}
		if path.IsAbs(req.dockerfile) || strings.Contains("/"+req.dockerfile+"/", "/../") {
			return req, fmt.Errorf("dockerfile %q: want a path inside the build context: %w", req.dockerfile, errdefs.ErrInvalidArgument)
		}
		args = map[string]string{}
		for _, kv := range qv["buildArg"] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return req, fmt.Errorf("buildArg %q: want NAME=VALUE: %w", kv, errdefs.ErrInvalidArgument)
			}
			args[k] = v
		}
		if raw := qv.Get("settings"); raw != "" {
			if err := api.UnmarshalStrict([]byte(raw), &settings); err != nil {
				return req, fmt.Errorf("settings: %w", err)
			}
		}
	default:
		return req, fmt.Errorf("Content-Type %q: application/x-tar (or application/gzip) for a build context, application/json for a Dockerfile alone: %w", ct, errdefs.ErrInvalidArgument)
	}
	req.args = args
	req.settings = TemplateSettingsIn(settings)
	if err := templates.CheckName(req.name); err != nil {
		return req, err
	}
	if err := req.settings.Validate(); err != nil {
		return req, err
	}
	if req.withContext {
		return req, nil
	}
	rec, err := recipe.ParseDockerfile(strings.NewReader(text), args)
	if err != nil {
		return req, err
	}
	for _, st := range rec.Steps {
		if st.Kind == recipe.Copy {
			return req, fmt.Errorf("line %d: COPY needs a build context (send it as application/x-tar): %w", st.Line, errdefs.ErrInvalidArgument)
		}
	}
	req.recipe = rec
	return req, nil
}

// unpackContext unpacks the build context into b's directory and reads
// its Dockerfile, through os.Root: a Dockerfile that is a symlink out of
// the context is not followed.
func (s *Server) unpackContext(ctx context.Context, q Builds, b *builds.Build, body io.Reader, dockerfile string, args map[string]string) (*recipe.Recipe, error) {
	if err := q.Unpack(ctx, b, body); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(b.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(dockerfile)
	if err != nil {
		return nil, fmt.Errorf("dockerfile %q is not a file in the build context: %w", dockerfile, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, maxDockerfileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dockerfile %q: not readable: %w", dockerfile, errdefs.ErrInvalidArgument)
	}
	if len(text) > maxDockerfileBytes {
		return nil, fmt.Errorf("dockerfile %q is over %d bytes: %w", dockerfile, maxDockerfileBytes, errdefs.ErrInvalidArgument)
	}
	rec, err := recipe.ParseDockerfile(bytes.NewReader(text), args)
	if err != nil {
		return nil, err
	}
	// COPY sources that are plain paths must be in the context now, so a
	// missing one, or one reached through a symlink out of the context
	// (which COPY would refuse too), is a 400 here rather than a failed
	// build later. Patterns are left to the build.
	for _, st := range rec.Steps {
		if st.Kind != recipe.Copy {
			continue
		}
		for _, src := range st.Src {
			clean := strings.TrimPrefix(path.Clean("/"+src), "/")
			if clean == "" || strings.ContainsAny(clean, "*?[") || strings.Contains("/"+src+"/", "/../") {
				continue // the context itself, a pattern; ".." the builder refuses
			}
			if _, err := root.Lstat(clean); err != nil {
				return nil, fmt.Errorf("line %d: COPY %s: not in the build context (a missing path, or one through a symlink out of it): %w", st.Line, src, errdefs.ErrInvalidArgument)
			}
		}
	}
	return rec, nil
}

// writeBuildError answers a refused build context: past a size bound it
// is 413 (the bound is the request's size, not a rate), else as usual.
func (s *Server) writeBuildError(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	if errors.Is(err, errdefs.ErrResourceExhausted) && !errors.As(err, &tooBig) {
		writeJSON(w, http.StatusRequestEntityTooLarge, api.Error{Code: errdefs.CodeResourceExhausted, Message: errdefs.PublicMessage(err)})
		return
	}
	s.writeError(w, r, err)
}

// buildStatus answers a build's state, its log from logsOffset.
func (s *Server) buildStatus(w http.ResponseWriter, r *http.Request) {
	q := s.cfg.Builds
	if q == nil {
		s.writeError(w, r, fmt.Errorf("template builds are not enabled on this server: %w", errdefs.ErrFailedPrecondition))
		return
	}
	b, err := q.Get(mustTenant(r).ID, r.PathValue("buildId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	offset := 0
	if v := r.URL.Query().Get("logsOffset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			s.writeError(w, r, fmt.Errorf("logsOffset %q: want an integer >= 0: %w", v, errdefs.ErrInvalidArgument))
			return
		}
	}
	writeJSON(w, http.StatusOK, buildOut(b, offset))
}

// buildOut is b's state as the API shows it.
func buildOut(b *builds.Build, offset int) api.TemplateBuild {
	snap := b.Snapshot(offset)
	name := b.Name
	if len(b.Tags) > 0 {
		name = templates.Tagged(b.Name, b.Tags[0])
	}
	out := api.TemplateBuild{BuildID: b.ID, Name: name, Status: snap.Status, Reason: snap.Reason,
		Logs: make([]api.TemplateBuildLog, len(snap.Logs)), LogsNext: offset + len(snap.Logs)}
	for i, l := range snap.Logs {
		out.Logs[i] = api.TemplateBuildLog{Timestamp: l.Timestamp, Level: l.Level, Message: l.Message}
	}
	if snap.Template != nil {
		t := TemplateOut(*snap.Template)
		out.Template = &t
	}
	return out
}
