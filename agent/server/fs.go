package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// fsErr wraps an OS error with its category and the path.
func fsErr(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return errf(categoryOf(err), "%s %s: %v", op, path, err)
}

var (
	namesMu sync.Mutex
	names   = map[string]string{} // "u1000" / "g1000" -> name
)

func lookupName(kind string, id uint32) string {
	k := kind + strconv.FormatUint(uint64(id), 10)
	namesMu.Lock()
	defer namesMu.Unlock()
	if n, ok := names[k]; ok {
		return n
	}
	n := strconv.FormatUint(uint64(id), 10)
	if kind == "u" {
		if u, err := user.LookupId(n); err == nil {
			n = u.Username
		}
	} else if g, err := user.LookupGroupId(n); err == nil {
		n = g.Name
	}
	names[k] = n
	return n
}

func fileInfo(path string, fi fs.FileInfo) agent.FileInfo {
	info := agent.FileInfo{
		Name:    fi.Name(),
		Path:    path,
		Size:    fi.Size(),
		Mode:    uint32(fi.Mode().Perm()),
		ModTime: fi.ModTime().UnixMilli(),
	}
	switch {
	case fi.Mode().IsRegular():
		info.Type = "file"
	case fi.IsDir():
		info.Type = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		info.Type = "symlink"
		if t, err := os.Readlink(path); err == nil {
			info.Target = t
		}
	default:
		info.Type = "other"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Owner = lookupName("u", st.Uid)
		info.Group = lookupName("g", st.Gid)
	}
	if info.Type == "file" || info.Type == "dir" {
		info.Metadata = readMetadata(path)
	}
	return info
}

func (s *Server) statPath(path string) (*agent.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fsErr("stat", path, err)
	}
	info := fileInfo(path, fi)
	return &info, nil
}

func (s *Server) stat(p agent.PathParams) (*agent.FileInfo, error) {
	return s.statPath(s.resolve(p.Path))
}

func (s *Server) readFile(p agent.ReadParams) (*agent.ReadResult, error) {
	if p.Path == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "read: path is required")
	}
	if p.Offset < 0 || p.Limit < 0 {
		return nil, errf(errdefs.CodeInvalidArgument, "read: negative offset or limit")
	}
	path := s.resolve(p.Path)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fsErr("read", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fsErr("read", path, err)
	}
	if fi.IsDir() {
		return nil, errf(errdefs.CodeFailedPrecondition, "read %s: is a directory", path)
	}
	if err := plainFile("read", path, f, fi); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit == 0 || limit > agent.ChunkSize {
		limit = agent.ChunkSize
	}
	buf := make([]byte, limit)
	n, err := f.ReadAt(buf, p.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fsErr("read", path, err)
	}
	return &agent.ReadResult{Data: buf[:n], Size: fi.Size(), EOF: p.Offset+int64(n) >= fi.Size()}, nil
}

func (s *Server) writeFile(p agent.WriteParams) (*agent.FileInfo, error) {
	if p.Path == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "write: path is required")
	}
	if p.Offset < 0 {
		return nil, errf(errdefs.CodeInvalidArgument, "write: negative offset")
	}
	if p.Append && p.Offset > 0 {
		return nil, errf(errdefs.CodeInvalidArgument, "write: append and offset exclude each other")
	}
	path := s.resolve(p.Path)
	if err := s.mkdirAll(filepath.Dir(path)); err != nil {
		return nil, fsErr("write", path, err)
	}
	mode := fs.FileMode(p.Mode & 0o7777)
	if mode == 0 {
		mode = 0o644
	}
	flags := os.O_WRONLY | os.O_CREATE
	switch {
	case p.Append:
		flags |= os.O_APPEND
	case p.Offset == 0:
		flags |= os.O_TRUNC
	}
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, flags|syscall.O_NONBLOCK, mode)
	if err != nil {
		return nil, fsErr("write", path, err)
	}
	if err := s.checkWritten(path, f, errors.Is(statErr, fs.ErrNotExist)); err != nil {
		f.Close()
		return nil, err
	}
	if p.Offset > 0 {
		_, err = f.WriteAt(p.Data, p.Offset)
	} else {
		_, err = f.Write(p.Data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fsErr("write", path, err)
	}
	if p.Mode != 0 {
		_ = os.Chmod(path, mode)
	}
	if !p.Append && p.Offset == 0 {
		if err := replaceMetadata(path, p.Metadata); err != nil {
			return nil, err
		}
	}
	return s.statPath(path)
}

func (s *Server) editFile(p agent.EditParams) (*agent.EditResult, error) {
	if p.Path == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "edit: path is required")
	}
	if p.Old == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "edit: old must not be empty")
	}
	path := s.resolve(p.Path)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fsErr("edit", path, err)
	}
	if fi.IsDir() {
		return nil, errf(errdefs.CodeFailedPrecondition, "edit %s: is a directory", path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fsErr("edit", path, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fsErr("edit", path, err)
	}
	if err := plainFile("edit", path, f, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fsErr("edit", path, err)
	}
	n := bytes.Count(data, []byte(p.Old))
	switch {
	case n == 0:
		return nil, errf(errdefs.CodeNotFound, "edit %s: old string not found", path)
	case n > 1 && !p.All:
		return nil, errf(errdefs.CodeFailedPrecondition, "edit %s: old string occurs %d times; make it unique or set all", path, n)
	}
	limit := 1
	if p.All {
		limit = -1
	}
	out := bytes.Replace(data, []byte(p.Old), []byte(p.New), limit)
	if err := os.WriteFile(path, out, fi.Mode().Perm()); err != nil {
		return nil, fsErr("edit", path, err)
	}
	if p.All {
		return &agent.EditResult{Replacements: n}, nil
	}
	return &agent.EditResult{Replacements: 1}, nil
}

const maxListEntries = 10000

func (s *Server) list(p agent.ListParams) (*agent.ListResult, error) {
	root := s.resolve(p.Path)
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsErr("list", root, err)
	}
	if !fi.IsDir() {
		return nil, errf(errdefs.CodeFailedPrecondition, "list %s: not a directory", root)
	}
	depth := max(p.Depth, 1)
	res := &agent.ListResult{Entries: []agent.FileInfo{}}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if dir == root {
				return fsErr("list", dir, err)
			}
			return nil // unreadable subdirectory: skip
		}
		for _, e := range ents {
			if len(res.Entries) >= maxListEntries {
				return nil
			}
			path := filepath.Join(dir, e.Name())
			info, err := e.Info()
			if err != nil {
				continue
			}
			res.Entries = append(res.Entries, fileInfo(path, info))
			if e.IsDir() && level < depth {
				if err := walk(path, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, err
	}
	return res, nil
}

func (s *Server) mkdir(p agent.PathParams) (*agent.FileInfo, error) {
	if p.Path == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "mkdir: path is required")
	}
	path := s.resolve(p.Path)
	if _, err := os.Lstat(path); err == nil {
		return nil, errf(errdefs.CodeAlreadyExists, "mkdir %s: already exists", path)
	}
	if err := s.mkdirAll(path); err != nil {
		return nil, fsErr("mkdir", path, err)
	}
	return s.statPath(path)
}

func (s *Server) remove(p agent.RemoveParams) (*agent.Empty, error) {
	if p.Path == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "remove: path is required")
	}
	path := s.resolve(p.Path)
	if path == "/" || path == s.cfg.Home {
		return nil, errf(errdefs.CodeInvalidArgument, "remove %s: refusing to remove it", path)
	}
	if _, err := os.Lstat(path); err != nil {
		return nil, fsErr("remove", path, err)
	}
	var err error
	if p.Recursive {
		err = os.RemoveAll(path)
	} else {
		err = os.Remove(path)
	}
	if err != nil {
		return nil, fsErr("remove", path, err)
	}
	return &agent.Empty{}, nil
}

func (s *Server) move(p agent.MoveParams) (*agent.FileInfo, error) {
	if p.From == "" || p.To == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "move: from and to are required")
	}
	from, to := s.resolve(p.From), s.resolve(p.To)
	if _, err := os.Lstat(from); err != nil {
		return nil, fsErr("move", from, err)
	}
	if err := s.mkdirAll(filepath.Dir(to)); err != nil {
		return nil, fsErr("move", to, err)
	}
	if err := os.Rename(from, to); err != nil {
		if !errors.Is(err, syscall.EXDEV) {
			return nil, fsErr("move", from, err)
		}
		// /tmp and /home/user are separate file systems: copy, then remove.
		if err := copyTree(from, to); err != nil {
			return nil, fsErr("move", from, err)
		}
		if err := os.RemoveAll(from); err != nil {
			return nil, fsErr("move", from, err)
		}
	}
	return s.statPath(to)
}

func copyTree(from, to string) error {
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(from)
		if err != nil {
			return err
		}
		if err := os.Symlink(t, to); err != nil {
			return err
		}
		return keepOwner(to, fi)
	case fi.IsDir():
		if err := os.Mkdir(to, fi.Mode().Perm()); err != nil {
			return err
		}
		if err := keepOwner(to, fi); err != nil {
			return err
		}
		ents, err := os.ReadDir(from)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyTree(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		src, err := os.Open(from)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(dst, src); err != nil {
			dst.Close()
			return err
		}
		if err := keepOwner(to, fi); err != nil {
			dst.Close()
			return err
		}
		return dst.Close()
	}
	return fmt.Errorf("%s: cannot copy special file", from)
}

// maxWalk bounds how many entries glob and grep visit.
const maxWalk = 200000

func (s *Server) glob(p agent.GlobParams) (*agent.GlobResult, error) {
	if p.Pattern == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "glob: pattern is required")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	root := s.resolve(p.Root)
	pattern := p.Pattern
	if filepath.IsAbs(pattern) {
		root, pattern = "/", strings.TrimPrefix(filepath.Clean(pattern), "/")
	}
	m, err := compileGlob(pattern)
	if err != nil {
		return nil, errf(errdefs.CodeInvalidArgument, "glob: %v", err)
	}
	start := filepath.Join(root, m.prefix())
	res := &agent.GlobResult{Paths: []string{}}
	visited := 0
	err = filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == start {
				return err
			}
			return nil
		}
		visited++
		if visited > maxWalk {
			res.Truncated = true
			return filepath.SkipAll
		}
		if d.IsDir() && skipDir(path) {
			return filepath.SkipDir
		}
		rel, rerr := filepath.Rel(root, path)
		if rerr != nil || rel == "." {
			return nil
		}
		if m.match(rel) {
			if len(res.Paths) >= limit {
				res.Truncated = true
				return filepath.SkipAll
			}
			res.Paths = append(res.Paths, path)
		}
		if d.IsDir() && !m.couldMatchUnder(rel) {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fsErr("glob", start, err)
	}
	sort.Strings(res.Paths)
	return res, nil
}

// skipDir keeps walks out of kernel file systems.
func skipDir(path string) bool {
	return path == "/proc" || path == "/sys" || path == "/dev"
}

const (
	maxGrepFile = 16 << 20
	maxGrepLine = 500
)

func (s *Server) grep(p agent.GrepParams) (*agent.GrepResult, error) {
	if p.Pattern == "" {
		return nil, errf(errdefs.CodeInvalidArgument, "grep: pattern is required")
	}
	expr := p.Pattern
	if p.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, errf(errdefs.CodeInvalidArgument, "grep: bad pattern: %v", err)
	}
	var filter *globMatcher
	if p.Glob != "" {
		if filter, err = compileGlob(p.Glob); err != nil {
			return nil, errf(errdefs.CodeInvalidArgument, "grep: bad glob: %v", err)
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	root := s.resolve(p.Path)
	if _, err := os.Stat(root); err != nil {
		return nil, fsErr("grep", root, err)
	}
	res := &agent.GrepResult{Matches: []agent.GrepMatch{}}
	visited := 0
	done := errors.New("done")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil
		}
		visited++
		if visited > maxWalk {
			res.Truncated = true
			return done
		}
		if d.IsDir() {
			if path != root && (d.Name() == ".git" || skipDir(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if filter != nil {
			rel, _ := filepath.Rel(root, path)
			if rel == "." {
				rel = d.Name()
			}
			if !filter.match(rel) && !filter.match(d.Name()) {
				return nil
			}
		}
		if grepFile(path, re, res, limit) {
			return done
		}
		return nil
	})
	if err != nil && err != done {
		return nil, fsErr("grep", root, err)
	}
	return res, nil
}

// grepFile appends matches of re in path; it reports true when the limit
// was reached.
func grepFile(path string, re *regexp.Regexp, res *agent.GrepResult, limit int) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() > maxGrepFile {
		return false
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(8000)
	if bytes.IndexByte(head, 0) >= 0 {
		return false // binary
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), maxGrepFile)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if !re.Match(b) {
			continue
		}
		if len(res.Matches) >= limit {
			res.Truncated = true
			return true
		}
		text := string(b)
		if len(text) > maxGrepLine {
			text = strings.ToValidUTF8(text[:maxGrepLine], "") + "..."
		}
		res.Matches = append(res.Matches, agent.GrepMatch{Path: path, Line: line, Text: text})
	}
	return false
}
