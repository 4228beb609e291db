package guard

import "strings"

// assignments looks at every '=' and ':' for key=value, key: value,
// "key": "value", key := / ::= / ?= / .= "value", "key" => "value", at
// every ',' for ("KEY", "value"), at every '>' for <key>value</key>, and at
// every ':' for IPv6.
func (sc *scanner) assignments() {
	s := sc.s
	n := len(s)
	v6end := 0
	for i := 0; i < n; i++ {
		c := s[i]
		if class[c]&cOp == 0 {
			continue
		}
		if c == ':' && i >= v6end {
			if e := sc.ipv6(i); e > 0 {
				v6end = e
				i = e - 1
				continue
			}
		}
		var p, val int // where the key ends (before the operator), where the value starts
		switch c {
		case ':':
			if i+1 < n && (s[i+1] == ':' || s[i+1] == '=') {
				continue // part of := or ::=, handled at the '='
			}
			p, val = i, i+1
		case '=':
			if i+1 < n && s[i+1] == '=' || i > 0 && (s[i-1] == '=' || s[i-1] == '!' || s[i-1] == '<' || s[i-1] == '>') {
				continue // a comparison
			}
			p, val = i, i+1
			if i+1 < n && s[i+1] == '>' {
				val++ // =>
			}
			for p > 0 && i-p < 3 && strings.IndexByte(":?.+", s[p-1]) >= 0 {
				p-- // :=, ::=, :::=, ?=, .=, +=
			}
		case ',':
			// ("KEY", "value"): a quoted key right before
			if i == 0 || s[i-1] != '"' && s[i-1] != '\'' {
				continue
			}
			p, val = i, i+1
		case '>':
			// <key>value</key>
			if e := sc.xmlValue(i); e > i {
				i = e - 1
			}
			continue
		}
		var kb [64]byte
		kbs, ok := keyBefore(s, p, &kb)
		if !ok || !maybeKey(kbs) {
			continue
		}
		if e := sc.keyValue(string(kbs), val); e > i {
			i = e - 1 // the value is examined once, even if it holds '=' or ':'
		}
	}
}

// keyBefore returns the lowercased key name ending before p (skipping
// blanks and a closing quote), with - and . as _; a type word between the
// name and the operator (var name string = ...) is skipped.
func keyBefore(s string, p int, kb *[64]byte) ([]byte, bool) {
	for tries := 0; tries < 2; tries++ {
		e := p
		for e > 0 && p-e < 3 && (s[e-1] == ' ' || s[e-1] == '\t') {
			e--
		}
		if e > 0 && (s[e-1] == '"' || s[e-1] == '\'') {
			e--
		}
		q := e
		for q > 0 && e-q < 64 && (is(s[q-1], cWord) || s[q-1] == '.' || s[q-1] == '$') {
			q--
		}
		if e-q < 3 {
			return nil, false
		}
		for k := q; k < e; k++ {
			c := s[k]
			switch {
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c == '-' || c == '.' || c == '$':
				c = '_'
			}
			kb[k-q] = c
		}
		key := kb[:e-q]
		switch string(key) {
		case "string", "str", "bytes", "char":
			p = q // a type: the name is before it
			continue
		}
		return key, true
	}
	return nil, false
}

// keyValue checks the value at val if key names a secret.
func (sc *scanner) keyValue(key string, val int) int {
	kind := keyKind(key)
	if kind == "" {
		return 0
	}
	weak := kind == TypeAPIKey && (key == "key" || strings.HasSuffix(key, "_key") && !strings.Contains(key, "api") &&
		!strings.Contains(key, "access") && !strings.Contains(key, "private") && !strings.Contains(key, "secret") || strings.Contains(key, "auth"))
	if kind == TypePassword {
		// PWD is the shell's working directory too (every `env` prints it):
		// with an absolute path for a value it is that.
		weak = key == "pwd"
	}
	return sc.value(kind, weak, val)
}

// xmlValue handles the '>' at i closing <key>: the value starts after
// blank space and runs to the next '<' or line end.
func (sc *scanner) xmlValue(i int) int {
	s := sc.s
	q := i
	for q > 0 && i-q < 64 && (is(s[q-1], cWord) || s[q-1] == '.' || s[q-1] == ':') {
		q--
	}
	if q == 0 || s[q-1] != '<' || i-q < 3 {
		return 0
	}
	var kb [64]byte
	kbs, ok := keyBefore(s, i, &kb)
	if !ok || !maybeKey(kbs) {
		return 0
	}
	key := string(kbs)
	if keyKind(key) == "" {
		return 0
	}
	a := i + 1
	for a < len(s) && a-i < 64 && isSpace(s[a]) {
		a++
	}
	// to the closing tag or the end of the line, so a stream that has the
	// value line but not yet the closing tag already sees it
	e := strings.IndexAny(s[a:min(len(s), a+1024)], "<\r\n")
	if e < 0 {
		return 0
	}
	v := strings.TrimRight(s[a:a+e], " \t")
	if v == "" || strings.ContainsAny(v, " \n") {
		return 0
	}
	// reuse the value rules on the bare text
	sub := scanner{g: sc.g, s: v, depth: sc.depth}
	sub.keyValue(key, 0)
	for _, f := range sub.out {
		sc.add(f.Type, a+f.Start, a+f.End, f.Confidence)
	}
	return a + e
}

// value checks the value of a secret-named key that starts at i. A weak
// key name (key, sort_key, auth) needs a value with no separators; the
// weak password key (pwd) never takes an absolute path.
func (sc *scanner) value(kind string, weak bool, i int) int {
	s := sc.s
	n := len(s)
	// An assignment or a key's colon, not ("KEY", value)'s comma.
	sep := i > 0 && (s[i-1] == '=' || s[i-1] == ':' || s[i-1] == '>')
	for k := 0; k < 3 && i < n && (s[i] == '=' || s[i] == ':'); k++ {
		i++
	}
	for k := 0; k < 4 && i < n && (s[i] == ' ' || s[i] == '\t'); k++ {
		i++
	}
	if i >= n {
		return 0
	}
	if kind == TypeAPIKey {
		for _, scheme := range []string{"Bearer ", "Basic ", "Token "} {
			if hasPrefixFold(s[i:], scheme) {
				i += len(scheme)
				break
			}
		}
	}
	var a, e int
	bare := true
	if q := s[i]; q == '"' || q == '\'' || q == '`' {
		bare = false
		a = i + 1
		x := strings.IndexByte(s[a:min(n, a+1024)], q)
		if x < 0 {
			return 0
		}
		e = a + x
	} else {
		a = i
		e = a
		for e < n && e-a < 1024 && s[e] > ' ' && strings.IndexByte(",;&)}]\"'`\\<", s[e]) < 0 {
			e++
		}
	}
	v := s[a:e]
	end := e
	if placeholder(v) || strings.ContainsAny(v, "([ ") || strings.Contains(v, "://") {
		return end
	}
	switch kind {
	case TypePassword:
		if len(v) < 6 || entropy(v) < 2.5 || identPath(v) || weak && v[0] == '/' || bare && sep && codeName(v) && codeEnds(s, e) {
			return end
		}
		sc.add(TypePassword, a, e, 0.7)
	case TypeAWSSecretKey:
		if len(v) == 40 {
			if awsSecretShape(v) {
				sc.add(TypeAWSSecretKey, a, e, 0.9)
			}
			return end // a SHA-1 or the documented example is not a secret
		}
		fallthrough
	case TypeAPIKey:
		d, u, l := mix(v)
		if !tokenChars(v, weak) {
			return end
		}
		if len(v) < 16 || weak && len(v) < 20 || !d || !(u || l) || entropy(v) < 3.3 || identPath(v) || isUUID(v) ||
			strings.HasPrefix(v, "sha256:") || strings.HasPrefix(v, "sha512:") || v[0] == '/' {
			return end
		}
		sc.add(TypeAPIKey, a, e, 0.6)
	}
	return end
}

// tokenChars reports whether v is made of token characters; strict
// allows no separators.
func tokenChars(v string, strict bool) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if is(c, cAlnum) || c == '+' || c == '/' || c == '=' {
			continue
		}
		if !strict && (c == '-' || c == '_' || c == '.' || c == '~') {
			continue
		}
		return false
	}
	return true
}

// codeName reports an unquoted value that may be a name in code (a
// variable, a handler: inputFocus, db_password): letters and '_' from a
// lowercase start. Digits or other signs make it a password (hunter2,
// s3cr3t-V4lue), and so does a capital start (Summertime, SUPER_SECRET).
func codeName(v string) bool {
	if !is(v[0], cLower) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !is(c, cAlpha) && c != '_' {
			return false
		}
	}
	return true
}

// codeEnds reports whether the value ending at e is followed, past blanks,
// by what ends an expression in code: ';', ',', ')', '}' or ']'
// ("noVNC_password_input" : inputFocus; login({password: passwordValue})).
// A value at the end of its line (an env or ini file, YAML, a flag) or
// before '&' or a quote (a query string, a form body) is a password.
func codeEnds(s string, e int) bool {
	for e < len(s) && (s[e] == ' ' || s[e] == '\t') {
		e++
	}
	return e < len(s) && strings.IndexByte(";,)}]", s[e]) >= 0
}

// identPath reports code-like values: self.password, os.environ, config.x.
func identPath(v string) bool {
	if !strings.Contains(v, ".") {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !is(v[i], cAlpha) && v[i] != '_' && v[i] != '.' {
			return false
		}
	}
	return true
}

// awsSecretShape: 40 of [A-Za-z0-9/+], not hex (a SHA-1), not AWS's
// documented example, random-looking.
func awsSecretShape(v string) bool {
	hex := true
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !is(c, cAlnum) && c != '/' && c != '+' {
			return false
		}
		hex = hex && is(c, cHex)
	}
	return !hex && !strings.Contains(v, "EXAMPLEKEY") && entropy(v) >= 3.5
}

func isUUID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if v[i] != '-' {
				return false
			}
		} else if !is(v[i], cHex) {
			return false
		}
	}
	return true
}
