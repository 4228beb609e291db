// Package dockerignore reads a build context's .dockerignore: the paths a
// Dockerfile build neither uploads nor lets COPY see, by Docker's rules
// (patterns relative to the context's root, `**`, `!` re-includes a path
// a pattern before it excluded, a later pattern wins). The Dockerfile and
// the .dockerignore itself always travel with the context, as in Docker;
// COPY does not see them when a pattern names them.
package dockerignore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/sandlot/sandlot/errdefs"
)

// File is the ignore file's name at the context's root.
const File = ".dockerignore"

// MaxBytes bounds the file: it is read whole into memory.
const MaxBytes = 1 << 20

// Matcher says which context paths are ignored. The nil Matcher (no
// .dockerignore) ignores nothing. A Matcher is for one goroutine.
type Matcher struct {
	pm *patternmatcher.PatternMatcher
}

// Load reads File at the root of ctx (nil, nil when there is none). A
// file past MaxBytes, or a pattern that does not compile, is
// errdefs.ErrInvalidArgument.
func Load(ctx fs.FS) (*Matcher, error) {
	f, err := ctx.Open(File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%s: more than %d bytes: %w", File, MaxBytes, errdefs.ErrInvalidArgument)
	}
	return Parse(string(b))
}

// Parse compiles the text of an ignore file.
func Parse(text string) (*Matcher, error) {
	patterns, err := ignorefile.ReadAll(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", File, err, errdefs.ErrInvalidArgument)
	}
	pm, err := patternmatcher.New(patterns)
	if err == nil {
		// Patterns compile on their first match: one now, so that a bad
		// one is this error rather than a path matched wrongly later.
		_, err = pm.MatchesOrParentMatches("a")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", File, err, errdefs.ErrInvalidArgument)
	}
	return &Matcher{pm: pm}, nil
}

// Ignored reports whether rel (slash-separated, relative to the context's
// root) is ignored: a pattern names it or one of its parents, and no later
// `!` pattern takes it back. The root itself never is.
func (m *Matcher) Ignored(rel string) bool {
	if m == nil {
		return false
	}
	rel = path.Clean(rel)
	if rel == "." || rel == "/" {
		return false
	}
	ok, err := m.pm.MatchesOrParentMatches(rel)
	return err == nil && ok
}

// Reincludes reports whether a `!` pattern may take back a path inside
// an ignored directory, so that a walk must still look inside it.
func (m *Matcher) Reincludes() bool { return m != nil && m.pm.Exclusions() }
