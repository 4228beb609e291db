package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/agent"
	fspb "github.com/sandlot/sandlot/e2bwire/filesystem"
	"github.com/sandlot/sandlot/errdefs"
)

func fileInfo(e *fspb.EntryInfo) *agent.FileInfo {
	if e == nil {
		return nil
	}
	fi := &agent.FileInfo{Name: e.GetName(), Path: e.GetPath(), Size: e.GetSize(), Mode: e.GetMode() & 0o7777,
		Owner: e.GetOwner(), Group: e.GetGroup(), Target: e.GetSymlinkTarget()}
	if t := e.GetModifiedTime(); t != nil {
		fi.ModTime = t.AsTime().UnixMilli()
	}
	switch e.GetType() {
	case fspb.FileType_FILE_TYPE_FILE:
		fi.Type = "file"
	case fspb.FileType_FILE_TYPE_DIRECTORY:
		fi.Type = "dir"
	case fspb.FileType_FILE_TYPE_SYMLINK:
		fi.Type = "symlink"
	default:
		fi.Type = "other"
	}
	return fi
}

// readAll fetches a whole file with GET /files (retried on a transient
// failure, as a read can be).
func (s *Sandbox) readAll(ctx context.Context, p string) ([]byte, error) {
	req, err := http.NewRequestWithContext(idempotent(ctx), http.MethodGet, s.envdURL+"/files?"+url.Values{"path": {p}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.envd.Do(req)
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 512<<20))
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	if resp.StatusCode >= 300 {
		return nil, sandboxStatusError(resp.StatusCode, b)
	}
	return b, nil
}

// upload writes a whole file with POST /files (octet-stream).
func (s *Sandbox) upload(ctx context.Context, p string, data []byte) (*agent.FileInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.envdURL+"/files?"+url.Values{"path": {p}}.Encode(), bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.envd.Do(req)
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return nil, sandboxStatusError(resp.StatusCode, b)
	}
	return s.Stat(ctx, p)
}

// ReadFile implements contexts.Sandbox with one ranged GET /files per
// chunk (envd serves Range). A server that ignores Range answers 200 with
// the whole file: the prefix is skipped as it streams and at most one chunk
// is kept.
func (s *Sandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	s.touch()
	limit := p.Limit
	if limit <= 0 || limit > agent.ChunkSize {
		limit = agent.ChunkSize
	}
	off := max(p.Offset, 0)
	req, err := http.NewRequestWithContext(idempotent(ctx), http.MethodGet, s.envdURL+"/files?"+url.Values{"path": {p.Path}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+limit-1))
	resp, err := s.envd.Do(req)
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		size, ok := rangeTotal(resp.Header.Get("Content-Range"))
		if !ok {
			return nil, fmt.Errorf("e2b read %s: bad Content-Range %q: %w", p.Path, resp.Header.Get("Content-Range"), errdefs.ErrUnavailable)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return nil, transportError(s.envdURL, err)
		}
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("e2b read %s: the server sent more than the %d bytes asked: %w", p.Path, limit, errdefs.ErrUnavailable)
		}
		return &agent.ReadResult{Data: data, Size: size, EOF: off+int64(len(data)) >= size}, nil
	case http.StatusRequestedRangeNotSatisfiable: // offset at or past the end
		size, ok := rangeTotal(resp.Header.Get("Content-Range"))
		if !ok {
			fi, err := s.Stat(ctx, p.Path)
			if err != nil {
				return nil, err
			}
			size = fi.Size
		}
		return &agent.ReadResult{Data: []byte{}, Size: size, EOF: true}, nil
	case http.StatusOK:
		return s.readPrefixed(ctx, p.Path, resp, off, limit)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return nil, sandboxStatusError(resp.StatusCode, b)
}

// readPrefixed reads [off, off+limit) from a whole-file answer.
func (s *Sandbox) readPrefixed(ctx context.Context, path string, resp *http.Response, off, limit int64) (*agent.ReadResult, error) {
	skipped, err := io.CopyN(io.Discard, resp.Body, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, transportError(s.envdURL, err)
	}
	data := make([]byte, 0, min(limit, max(resp.ContentLength-off, 0)))
	if skipped == off {
		data, err = io.ReadAll(io.LimitReader(resp.Body, limit))
		if err != nil {
			return nil, transportError(s.envdURL, err)
		}
	}
	end := skipped + int64(len(data))
	if resp.ContentLength >= 0 {
		return &agent.ReadResult{Data: data, Size: resp.ContentLength, EOF: end >= resp.ContentLength}, nil
	}
	var one [1]byte
	if n, _ := io.ReadFull(resp.Body, one[:]); n == 0 {
		return &agent.ReadResult{Data: data, Size: end, EOF: true}, nil
	}
	fi, err := s.Stat(ctx, path) // more follows and the length is unknown
	if err != nil {
		return nil, err
	}
	return &agent.ReadResult{Data: data, Size: fi.Size, EOF: false}, nil
}

// rangeTotal parses the complete length of a Content-Range header
// ("bytes 0-99/1234" or "bytes */1234").
func rangeTotal(h string) (int64, bool) {
	_, total, ok := strings.Cut(h, "/")
	if !ok || !strings.HasPrefix(h, "bytes ") {
		return 0, false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil && n >= 0
}

// WriteFile implements contexts.Sandbox. Offsets and appends read, modify
// and rewrite the file (envd has no partial write); not atomic.
func (s *Sandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	s.touch()
	data := p.Data
	if p.Append || p.Offset > 0 {
		old, err := s.readAll(ctx, p.Path)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return nil, err
		}
		if p.Append {
			data = append(old, p.Data...)
		} else {
			if int64(len(old)) < p.Offset {
				old = append(old, make([]byte, p.Offset-int64(len(old)))...)
			}
			data = append(old[:p.Offset:p.Offset], p.Data...)
		}
	}
	return s.upload(ctx, p.Path, data)
}

// EditFile implements contexts.Sandbox as read, replace, write.
func (s *Sandbox) EditFile(ctx context.Context, p agent.EditParams) (*agent.EditResult, error) {
	s.touch()
	b, err := s.readAll(ctx, p.Path)
	if err != nil {
		return nil, err
	}
	n := strings.Count(string(b), p.Old)
	switch {
	case p.Old == "" || n == 0:
		return nil, fmt.Errorf("edit %s: text not found: %w", p.Path, errdefs.ErrNotFound)
	case n > 1 && !p.All:
		return nil, fmt.Errorf("edit %s: text occurs %d times: %w", p.Path, n, errdefs.ErrFailedPrecondition)
	}
	if _, err := s.upload(ctx, p.Path, []byte(strings.ReplaceAll(string(b), p.Old, p.New))); err != nil {
		return nil, err
	}
	return &agent.EditResult{Replacements: n}, nil
}

// List implements contexts.Sandbox.
func (s *Sandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: p.Path, Depth: uint32(max(p.Depth, 1))}))
	if err != nil {
		return nil, rpcError("list", err)
	}
	out := []agent.FileInfo{}
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, *fileInfo(e))
	}
	return out, nil
}

// Stat implements contexts.Sandbox.
func (s *Sandbox) Stat(ctx context.Context, p string) (*agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: p}))
	if err != nil {
		return nil, rpcError("stat", err)
	}
	return fileInfo(resp.Msg.GetEntry()), nil
}

// Mkdir implements contexts.Sandbox; an existing directory is fine.
func (s *Sandbox) Mkdir(ctx context.Context, p string) (*agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: p}))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return s.Stat(ctx, p)
	}
	if err != nil {
		return nil, rpcError("mkdir", err)
	}
	return fileInfo(resp.Msg.GetEntry()), nil
}

// Remove implements contexts.Sandbox (envd removes recursively).
func (s *Sandbox) Remove(ctx context.Context, p agent.RemoveParams) error {
	s.touch()
	if !p.Recursive {
		fi, err := s.Stat(ctx, p.Path)
		if err != nil {
			return err
		}
		if fi.Type == "dir" {
			entries, err := s.List(ctx, agent.ListParams{Path: p.Path})
			if err != nil {
				return err
			}
			if len(entries) > 0 {
				return fmt.Errorf("remove %s: directory not empty: %w", p.Path, errdefs.ErrFailedPrecondition)
			}
		}
	}
	_, err := s.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: p.Path}))
	return rpcError("remove", err)
}

// Move implements contexts.Sandbox.
func (s *Sandbox) Move(ctx context.Context, p agent.MoveParams) (*agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: p.From, Destination: p.To}))
	if err != nil {
		return nil, rpcError("move", err)
	}
	return fileInfo(resp.Msg.GetEntry()), nil
}

// Glob implements contexts.Sandbox over a deep ListDir.
func (s *Sandbox) Glob(ctx context.Context, p agent.GlobParams) (*agent.GlobResult, error) {
	root := p.Root
	if root == "" {
		root = "/home/user"
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	entries, err := s.List(ctx, agent.ListParams{Path: root, Depth: 32})
	if err != nil {
		return nil, err
	}
	re, err := globRegexp(p.Pattern)
	if err != nil {
		return nil, err
	}
	res := &agent.GlobResult{Paths: []string{}}
	for _, e := range entries {
		rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, root), "/")
		if re.MatchString(rel) {
			if len(res.Paths) == limit {
				res.Truncated = true
				break
			}
			res.Paths = append(res.Paths, e.Path)
		}
	}
	return res, nil
}

// globRegexp turns a glob with ** into a regexp over slash paths.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			i++
			if i+1 < len(pattern) && pattern[i+1] == '/' {
				i++
				b.WriteString("(?:.*/)?")
			} else {
				b.WriteString(".*")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("glob %q: %w", pattern, errdefs.ErrInvalidArgument)
	}
	return re, nil
}

// Grep implements contexts.Sandbox with grep -E in the sandbox (POSIX ERE,
// close to but not exactly RE2).
func (s *Sandbox) Grep(ctx context.Context, p agent.GrepParams) (*agent.GrepResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	// Relative to the home directory, as the agent resolves paths, and
	// absolute, so the matches name absolute paths as a local sandbox's do.
	where := path.Join("/home/user", p.Path)
	if path.IsAbs(p.Path) {
		where = path.Clean(p.Path)
	}
	argv := []string{"grep", "-rnIE"}
	if p.IgnoreCase {
		argv[1] = "-rniIE"
	}
	if p.Glob != "" {
		argv = append(argv, "--include="+p.Glob)
	}
	argv = append(argv, "--", p.Pattern, where)
	res, err := s.Exec(ctx, agent.ExecParams{Argv: argv, TimeoutMs: 60000}, nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode > 1 {
		return nil, fmt.Errorf("grep: %s: %w", strings.TrimSpace(res.Stderr), errdefs.ErrInvalidArgument)
	}
	out := &agent.GrepResult{Matches: []agent.GrepMatch{}}
	for _, line := range strings.Split(res.Stdout, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) < 3 {
			continue
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		if len(out.Matches) == limit {
			out.Truncated = true
			break
		}
		out.Matches = append(out.Matches, agent.GrepMatch{Path: path.Clean(parts[0]), Line: n, Text: parts[2]})
	}
	return out, nil
}
