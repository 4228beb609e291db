package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
)

// File tool limits.
const (
	defaultReadLines = 2000
	// maxReadScan bounds how much of a file read_file scans to reach the
	// requested lines.
	maxReadScan  = 16 << 20
	maxEntries   = 2000 // list_files
	maxGrepLine  = 2000 // characters kept of one matching line
	maxGlobPaths = 1000
	maxGrepMatch = 500
)

// ReadFileResult is the result of read_file. Content holds lines
// StartLine..EndLine (counting from 1) with their newlines. TotalLines is
// set when the whole file was scanned.
type ReadFileResult struct {
	api.PathRef
	Path       string `json:"path"`
	Content    string `json:"content"`
	StartLine  int    `json:"startLine"`
	EndLine    int    `json:"endLine"`
	TotalLines int    `json:"totalLines,omitempty"`
	Size       int64  `json:"size"`
	// Truncated is set when lines after EndLine exist or were not
	// scanned, or the content was cut to MaxOutput characters.
	Truncated bool `json:"truncated"`
}

// WriteFileResult is the result of write_file.
type WriteFileResult struct {
	api.PathRef
	Success bool   `json:"success"`
	Path    string `json:"path"`
	Size    int64  `json:"size"`
}

// EditFileResult is the result of edit_file.
type EditFileResult struct {
	api.PathRef
	Success      bool   `json:"success"`
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
}

// FileEntry is one entry of list_files.
type FileEntry struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Type    string `json:"type"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"modTime"`
}

// ListFilesResult is the result of list_files.
type ListFilesResult struct {
	api.PathRef
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// GlobResult is the result of glob.
type GlobResult struct {
	api.PathRef
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated"`
}

// GrepResult is the result of grep.
type GrepResult struct {
	api.PathRef
	Matches   []agent.GrepMatch `json:"matches"`
	Truncated bool              `json:"truncated"`
}

// use runs fn on the identity's guarded sandbox and prefixes errors with
// the tool name.
func (r *Registry) use(ctx context.Context, tool string, call Call, fn func(ctx context.Context, sb contexts.Sandbox) error) error {
	err := r.c.Use(ctx, call.Identity, r.create(call), func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		noteSandbox(ctx, sb.ID())
		return fn(ctx, sb)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	return nil
}

// errEnough stops a read_file scan that has the lines it needs.
var errEnough = errors.New("read_file: enough lines")

// readFile reads text by lines through contexts.ReadFile, so the lines
// are guarded as one text. Files of a binary format (recognised by their
// signature, guard.Format) are refused with invalid_argument: a model
// cannot use raw bytes, and base64 would only waste its context; run_code
// can process them. Any other file is text, whatever bytes it holds.
func (r *Registry) readFile(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
	path := str(args, "path")
	first := int(integer(args, "offset"))
	if first <= 0 {
		first = 1
	}
	limit := int(integer(args, "limit"))
	if limit <= 0 {
		limit = defaultReadLines
	}
	want := first + limit - 1 // last line wanted
	var res *ReadFileResult
	err := r.use(ctx, "read_file", call, func(ctx context.Context, sb contexts.Sandbox) error {
		var buf []byte
		var size int64
		var refused error // a binary file
		lines, sniffed := 0, false
		sniff := func() {
			sniffed = true
			if f := guard.Format(buf[:min(len(buf), guard.SniffLen)]); f != "" {
				refused = fmt.Errorf("%s is a binary file (%s, %d bytes); process it with run_code instead: %w",
					path, f, size, errdefs.ErrInvalidArgument)
			}
		}
		eof := false
		err := contexts.ReadFile(ctx, sb, path, func(c contexts.FileChunk) error {
			size, eof = c.Size, c.EOF
			buf = append(buf, c.Data...)
			lines += bytes.Count(c.Data, []byte("\n"))
			if !sniffed && len(buf) >= guard.SniffLen {
				sniff()
			}
			// The scan budget counts guarded bytes: it bounds memory.
			if refused != nil || lines >= want || len(buf) >= maxReadScan {
				return errEnough
			}
			return nil
		})
		if !sniffed {
			sniff()
		}
		switch {
		case refused != nil:
			return refused
		case err != nil && !errors.Is(err, errEnough):
			return fmt.Errorf("%s: %w", path, err)
		}
		res = sliceLines(buf, eof, first, limit)
		res.Path, res.Size = path, size
		var t bool
		res.Content, t = truncate(res.Content, r.cfg.MaxOutput)
		res.Truncated = res.Truncated || t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// sliceLines returns lines first..first+limit-1 of buf. eof says buf is the
// whole file.
func sliceLines(buf []byte, eof bool, first, limit int) *ReadFileResult {
	res := &ReadFileResult{StartLine: first}
	lines := strings.SplitAfter(string(buf), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if !eof && len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
		lines = lines[:len(lines)-1] // incomplete last line of a partial scan
	}
	if eof {
		res.TotalLines = len(lines)
	}
	if first > len(lines) {
		res.EndLine = first - 1
		res.Truncated = !eof
		return res
	}
	end := first - 1 + limit
	if end > len(lines) {
		end = len(lines)
	}
	res.Content = strings.Join(lines[first-1:end], "")
	res.EndLine = end
	res.Truncated = end < len(lines) || !eof
	return res
}

func (r *Registry) writeFile(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
	path, content := str(args, "path"), str(args, "content")
	var res *WriteFileResult
	err := r.use(ctx, "write_file", call, func(ctx context.Context, sb contexts.Sandbox) error {
		data := []byte(content)
		fi, err := writeAll(ctx, sb, path, data, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		res = &WriteFileResult{Success: true, Path: fi.Path, Size: int64(len(data))}
		if res.Path == "" {
			res.Path = path
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// writeAll replaces the file at path with data, in frames of at most
// agent.ChunkSize: the first truncates, later ones write at their offset.
func writeAll(ctx context.Context, sb contexts.Sandbox, path string, data []byte, mode uint32) (*agent.FileInfo, error) {
	var fi *agent.FileInfo
	for off := 0; ; {
		end := min(off+agent.ChunkSize, len(data))
		var err error
		fi, err = sb.WriteFile(ctx, agent.WriteParams{Path: path, Data: data[off:end], Offset: int64(off), Mode: mode})
		if err != nil {
			return nil, err
		}
		if end == len(data) {
			return fi, nil
		}
		off = end
	}
}

func (r *Registry) editFile(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
	path := str(args, "path")
	p := agent.EditParams{Path: path, Old: str(args, "old_string"), New: str(args, "new_string"), All: boolean(args, "replace_all")}
	if p.Old == p.New {
		return nil, fmt.Errorf("edit_file: old_string and new_string are the same: %w", errdefs.ErrInvalidArgument)
	}
	var res *EditFileResult
	err := r.use(ctx, "edit_file", call, func(ctx context.Context, sb contexts.Sandbox) error {
		er, err := sb.EditFile(ctx, p)
		switch {
		case err == nil:
			res = &EditFileResult{Success: true, Path: path, Replacements: er.Replacements}
			return nil
		case errors.Is(err, errdefs.ErrNotFound):
			// The agent says not_found for a missing file and for a
			// missing old_string; tell them apart for the model.
			if _, serr := sb.Stat(ctx, path); serr != nil && errors.Is(serr, errdefs.ErrNotFound) {
				return fmt.Errorf("%s: file not found: %w", path, errdefs.ErrNotFound)
			}
			return fmt.Errorf("%s: old_string not found: %w", path, errdefs.ErrNotFound)
		case errors.Is(err, errdefs.ErrFailedPrecondition):
			return fmt.Errorf("%s: old_string is not unique; pass replace_all or more context: %w", path, errdefs.ErrFailedPrecondition)
		default:
			return fmt.Errorf("%s: %w", path, err)
		}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (r *Registry) listFiles(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
	path := str(args, "path")
	p := agent.ListParams{Path: path, Depth: int(integer(args, "depth"))} // "": the home directory
	if path == "" {
		path = "/home/user"
	}
	res := &ListFilesResult{Path: path, Entries: []FileEntry{}}
	err := r.use(ctx, "list_files", call, func(ctx context.Context, sb contexts.Sandbox) error {
		infos, err := sb.List(ctx, p)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for i, fi := range infos {
			if i == maxEntries {
				res.Truncated = true
				break
			}
			res.Entries = append(res.Entries, FileEntry{Name: fi.Name, Path: fi.Path, Type: fi.Type, Size: fi.Size, ModTime: fi.ModTime})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (r *Registry) glob(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
	p := agent.GlobParams{Pattern: str(args, "pattern"), Root: str(args, "path"), Limit: maxGlobPaths}
	res := &GlobResult{Paths: []string{}}
	err := r.use(ctx, "glob", call, func(ctx context.Context, sb contexts.Sandbox) error {
		gr, err := sb.Glob(ctx, p)
		if err != nil {
			return err
		}
		if gr.Paths != nil {
			res.Paths = gr.Paths
		}
		res.Truncated = gr.Truncated
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (r *Registry) grep(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
	p := agent.GrepParams{
		Pattern:    str(args, "pattern"),
		Path:       str(args, "path"),
		Glob:       str(args, "glob"),
		IgnoreCase: boolean(args, "ignore_case"),
		Limit:      maxGrepMatch,
	}
	if _, err := regexp.Compile(p.Pattern); err != nil {
		return nil, fmt.Errorf("grep: pattern is not a valid RE2 regular expression: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	res := &GrepResult{Matches: []agent.GrepMatch{}}
	err := r.use(ctx, "grep", call, func(ctx context.Context, sb contexts.Sandbox) error {
		gr, err := sb.Grep(ctx, p)
		if err != nil {
			return err
		}
		res.Truncated = gr.Truncated
		total := 0
		for _, m := range gr.Matches {
			var t bool
			m.Text, t = truncate(m.Text, maxGrepLine)
			res.Truncated = res.Truncated || t
			total += len(m.Text) + len(m.Path)
			if total > r.cfg.MaxOutput {
				res.Truncated = true
				break
			}
			res.Matches = append(res.Matches, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
