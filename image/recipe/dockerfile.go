package recipe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// maxDockerfile bounds what ParseDockerfile reads.
const maxDockerfile = 1 << 20

// ParseDockerfile reads a single-stage Dockerfile. args are --build-arg
// values: they override ARG defaults, and only declared ARGs take them.
// Unsupported instructions and flags are errors that name their line.
func ParseDockerfile(r io.Reader, args map[string]string) (*Recipe, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDockerfile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDockerfile {
		return nil, fmt.Errorf("recipe: Dockerfile over %d bytes: %w", maxDockerfile, errdefs.ErrInvalidArgument)
	}
	lines, err := logicalLines(string(b))
	if err != nil {
		return nil, err
	}
	p := &dfParser{buildArgs: args, vars: map[string]string{}}
	for _, l := range lines {
		if err := p.instruction(l); err != nil {
			return nil, err
		}
	}
	if p.from == 0 {
		return nil, fmt.Errorf("recipe: Dockerfile has no FROM: %w", errdefs.ErrInvalidArgument)
	}
	return &Recipe{Steps: p.steps, DockerIgnore: true}, nil
}

type line struct {
	n    int    // line number of the instruction's first line
	text string // continuation lines joined, comments dropped
}

// logicalLines joins continuation lines (a trailing backslash) and drops
// comments and blank lines. A comment line inside a continued instruction
// is dropped too, as Docker does.
func logicalLines(src string) ([]line, error) {
	var out []line
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), maxDockerfile)
	n := 0
	for sc.Scan() {
		n++
		raw := strings.TrimRight(sc.Text(), "\r")
		trimmed := strings.TrimSpace(raw)
		if strings.HasPrefix(trimmed, "#") {
			if n == 1 && strings.HasPrefix(strings.ToLower(strings.ReplaceAll(trimmed, " ", "")), "#escape=") {
				return nil, errorf(n, "parser directive escape is not supported")
			}
			continue
		}
		if trimmed == "" && cur.Len() == 0 {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, line{n: start, text: strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("recipe: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if cur.Len() > 0 {
		out = append(out, line{n: start, text: strings.TrimSpace(cur.String())})
	}
	return out, nil
}

type dfParser struct {
	buildArgs map[string]string
	vars      map[string]string // ARG and ENV values in scope, for substitution
	args      []EnvVar          // ARGs in scope after FROM, in order
	steps     []Step
	from      int // line of FROM, 0 before it
}

func (p *dfParser) instruction(l line) error {
	kw, rest, _ := strings.Cut(l.text, " ")
	kw = strings.ToUpper(kw)
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "<<") && (kw == "RUN" || kw == "COPY") {
		return errorf(l.n, "%s heredocs are not supported", kw)
	}
	if p.from == 0 && kw != "ARG" && kw != "FROM" {
		return errorf(l.n, "%s before FROM", kw)
	}
	switch kw {
	case "FROM":
		return p.fromStep(l, rest)
	case "ARG":
		return p.arg(l, rest)
	case "RUN", "CMD", "ENTRYPOINT":
		flags, body := splitFlags(rest)
		if len(flags) > 0 {
			return errorf(l.n, "%s flag %s is not supported", kw, flags[0])
		}
		if body == "" {
			return errorf(l.n, "%s needs a command", kw)
		}
		st := Step{Kind: Kind(kw), Line: l.n}
		if argv, ok, err := jsonArray(body); err != nil {
			return errorf(l.n, "%s: %v", kw, err)
		} else if ok {
			st.Args = argv
		} else {
			st.Command = body
		}
		if kw == "RUN" {
			st.BuildArgs = append([]EnvVar(nil), p.args...)
		}
		p.steps = append(p.steps, st)
		return nil
	case "COPY":
		return p.copyStep(l, rest)
	case "ENV":
		return p.env(l, rest)
	case "WORKDIR":
		v, err := p.expand(l, rest)
		if err != nil || v == "" {
			return errorf(l.n, "WORKDIR needs a path")
		}
		p.steps = append(p.steps, Step{Kind: Workdir, Line: l.n, Path: v})
		return nil
	case "USER":
		v, err := p.expand(l, rest)
		if err != nil || v == "" || strings.ContainsAny(v, " \t") {
			return errorf(l.n, "USER needs one user[:group]")
		}
		p.steps = append(p.steps, Step{Kind: User, Line: l.n, User: v})
		return nil
	case "ADD":
		return errorf(l.n, "ADD is not supported: use COPY (remote URLs and archives are not fetched)")
	default:
		return errorf(l.n, "instruction %s is not supported (supported: FROM, ARG, RUN, COPY, ENV, WORKDIR, USER, CMD, ENTRYPOINT)", kw)
	}
}

func (p *dfParser) fromStep(l line, rest string) error {
	if p.from != 0 {
		return errorf(l.n, "a second FROM: multi-stage builds are not supported (first FROM on line %d)", p.from)
	}
	flags, body := splitFlags(rest)
	if len(flags) > 0 {
		return errorf(l.n, "FROM flag %s is not supported", flags[0])
	}
	words, err := p.words(l, body)
	if err != nil {
		return err
	}
	if len(words) == 2 || len(words) > 3 || (len(words) == 3 && !strings.EqualFold(words[1], "AS")) {
		return errorf(l.n, "FROM takes an image and an optional AS name")
	}
	if len(words) == 0 {
		return errorf(l.n, "FROM needs an image")
	}
	img := words[0]
	if img == "" {
		return errorf(l.n, "FROM image is empty after substitution")
	}
	p.from = l.n
	// ARGs declared before FROM only serve FROM; later ones are declared anew.
	p.vars = map[string]string{}
	p.steps = append(p.steps, Step{Kind: From, Line: l.n, Image: img})
	return nil
}

func (p *dfParser) arg(l line, rest string) error {
	words, err := p.words(l, rest)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return errorf(l.n, "ARG needs a name")
	}
	for _, w := range words {
		name, def, hasDef := strings.Cut(w, "=")
		if !validName(name) {
			return errorf(l.n, "ARG name %q is not valid", name)
		}
		v, given := p.buildArgs[name]
		if !given {
			if !hasDef {
				continue // declared without a value: unset
			}
			v = def
		}
		p.vars[name] = v
		if p.from != 0 {
			p.args = append(p.args, EnvVar{name, v})
		}
	}
	return nil
}

func (p *dfParser) env(l line, rest string) error {
	first, _, _ := strings.Cut(rest, " ")
	var vars []EnvVar
	if !strings.Contains(first, "=") {
		// Legacy form: ENV NAME the rest of the line.
		name, value, _ := strings.Cut(rest, " ")
		v, err := p.expand(l, strings.TrimSpace(value))
		if err != nil {
			return err
		}
		vars = append(vars, EnvVar{name, v})
	} else {
		words, err := p.words(l, rest)
		if err != nil {
			return err
		}
		for _, w := range words {
			name, value, ok := strings.Cut(w, "=")
			if !ok {
				return errorf(l.n, "ENV %q: want NAME=value", w)
			}
			vars = append(vars, EnvVar{name, value})
		}
	}
	if len(vars) == 0 {
		return errorf(l.n, "ENV needs NAME=value")
	}
	for _, v := range vars {
		if !validName(v.Name) {
			return errorf(l.n, "ENV name %q is not valid", v.Name)
		}
		p.vars[v.Name] = v.Value
	}
	p.steps = append(p.steps, Step{Kind: Env, Line: l.n, Env: vars})
	return nil
}

func (p *dfParser) copyStep(l line, rest string) error {
	flags, body := splitFlags(rest)
	st := Step{Kind: Copy, Line: l.n}
	for _, f := range flags {
		name, val, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		switch name {
		case "chown":
			v, err := p.expand(l, val)
			if err != nil {
				return err
			}
			st.User = v
		case "chmod":
			m, err := strconv.ParseUint(val, 8, 32)
			if err != nil || m > 0o7777 {
				return errorf(l.n, "COPY --chmod=%s: want octal permission bits", val)
			}
			st.Mode = uint32(m)
		default:
			return errorf(l.n, "COPY flag %s is not supported (supported: --chown, --chmod)", f)
		}
	}
	words, ok, err := jsonArray(body)
	if err != nil {
		return errorf(l.n, "COPY: %v", err)
	}
	if ok {
		for i, w := range words {
			if words[i], err = p.expand(l, w); err != nil {
				return err
			}
		}
	} else if words, err = p.words(l, body); err != nil {
		return err
	}
	if len(words) < 2 {
		return errorf(l.n, "COPY needs a source and a destination")
	}
	st.Src, st.Dest = words[:len(words)-1], words[len(words)-1]
	p.steps = append(p.steps, st)
	return nil
}

// splitFlags takes leading --flag[=value] words off s.
func splitFlags(s string) (flags []string, rest string) {
	for strings.HasPrefix(s, "--") {
		f, r, _ := strings.Cut(s, " ")
		flags = append(flags, f)
		s = strings.TrimSpace(r)
	}
	return flags, s
}

// jsonArray parses the exec form ["a", "b"]. ok is false when s is not
// meant as JSON (does not start with '[').
func jsonArray(s string) (words []string, ok bool, err error) {
	if !strings.HasPrefix(s, "[") {
		return nil, false, nil
	}
	if err := json.Unmarshal([]byte(s), &words); err != nil {
		// Docker runs an invalid JSON array in shell form; so do we.
		return nil, false, nil
	}
	if len(words) == 0 {
		return nil, true, fmt.Errorf("empty exec form")
	}
	return words, true, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
