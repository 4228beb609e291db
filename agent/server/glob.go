package server

import (
	"path"
	"strings"
)

// globMatcher matches slash-separated relative paths against a pattern
// whose segments use path.Match syntax, plus "**" for zero or more whole
// segments.
type globMatcher struct {
	segs []string
}

func compileGlob(pattern string) (*globMatcher, error) {
	pattern = strings.Trim(path.Clean("/"+pattern), "/")
	segs := strings.Split(pattern, "/")
	for _, s := range segs {
		if s == "**" {
			continue
		}
		if _, err := path.Match(s, ""); err != nil {
			return nil, err
		}
	}
	return &globMatcher{segs: segs}, nil
}

// prefix is the leading run of literal segments, where a walk can start.
func (m *globMatcher) prefix() string {
	var lit []string
	for _, s := range m.segs[:len(m.segs)-1] {
		if s == "**" || strings.ContainsAny(s, `*?[\`) {
			break
		}
		lit = append(lit, s)
	}
	return path.Join(lit...)
}

func (m *globMatcher) match(rel string) bool {
	return matchSegs(m.segs, strings.Split(rel, "/"), false)
}

// couldMatchUnder reports whether some path below directory rel can match.
func (m *globMatcher) couldMatchUnder(rel string) bool {
	return matchSegs(m.segs, strings.Split(rel, "/"), true)
}

// matchSegs matches name segments against pattern segments. With partial,
// it reports whether names is a prefix of some matching path.
func matchSegs(pat, names []string, partial bool) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// Collapse runs of ** and try every split point.
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(names); i++ {
				if matchSegs(pat, names[i:], partial) {
					return true
				}
			}
			return partial
		}
		if len(names) == 0 {
			return partial
		}
		if ok, _ := path.Match(pat[0], names[0]); !ok {
			return false
		}
		pat, names = pat[1:], names[1:]
	}
	// The pattern is used up: names must be too, and nothing below can match.
	return len(names) == 0 && !partial
}
