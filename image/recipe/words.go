package recipe

import (
	"fmt"
	"strings"
)

// words splits s into words the way Docker does for ARG, ENV, COPY and FROM:
// single quotes are literal, double quotes allow $ and \" \\ \$, a
// backslash outside quotes escapes the next character, and $NAME, ${NAME},
// ${NAME:-default} and ${NAME:+alternative} expand from the ARG and ENV
// values in scope (unset: empty).
func (p *dfParser) words(l line, s string) ([]string, error) {
	w, err := lex(s, p.vars, true)
	if err != nil {
		return nil, errorf(l.n, "%v", err)
	}
	return w, nil
}

// expand is words without splitting: one word out (WORKDIR, USER).
func (p *dfParser) expand(l line, s string) (string, error) {
	w, err := lex(s, p.vars, false)
	if err != nil {
		return "", errorf(l.n, "%v", err)
	}
	if len(w) == 0 {
		return "", nil
	}
	return w[0], nil
}

func lex(s string, vars map[string]string, split bool) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case split && (c == ' ' || c == '\t'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`, s[i+1]) >= 0:
					i++
					cur.WriteByte(s[i])
				case s[i] == '$':
					n, v, err := variable(s[i:], vars)
					if err != nil {
						return nil, err
					}
					cur.WriteString(v)
					i += n - 1
				default:
					cur.WriteByte(s[i])
				}
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote")
			}
		case c == '$':
			inWord = true
			n, v, err := variable(s[i:], vars)
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			i += n - 1
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// variable expands the reference at the start of s (which starts with $)
// and returns how many bytes it used.
func variable(s string, vars map[string]string) (int, string, error) {
	if len(s) < 2 {
		return 1, "$", nil
	}
	if s[1] != '{' {
		n := 1
		for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z' || n > 1 && s[n] >= '0' && s[n] <= '9') {
			n++
		}
		if n == 1 {
			return 1, "$", nil
		}
		return n, vars[s[1:n]], nil
	}
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return 0, "", fmt.Errorf("unterminated ${")
	}
	body := s[2:end]
	name, mod := body, ""
	if i := strings.Index(body, ":"); i >= 0 {
		name, mod = body[:i], body[i:]
	}
	if !validName(name) {
		return 0, "", fmt.Errorf("bad substitution ${%s}", body)
	}
	v, set := vars[name]
	switch {
	case mod == "":
		return end + 1, v, nil
	case strings.HasPrefix(mod, ":-"):
		if !set || v == "" {
			w, err := lex(mod[2:], vars, false)
			if err != nil || len(w) == 0 {
				return end + 1, "", err
			}
			return end + 1, w[0], nil
		}
		return end + 1, v, nil
	case strings.HasPrefix(mod, ":+"):
		if set && v != "" {
			w, err := lex(mod[2:], vars, false)
			if err != nil || len(w) == 0 {
				return end + 1, "", err
			}
			return end + 1, w[0], nil
		}
		return end + 1, "", nil
	default:
		return 0, "", fmt.Errorf("substitution ${%s} is not supported (supported: ${NAME}, ${NAME:-default}, ${NAME:+alternative})", body)
	}
}
