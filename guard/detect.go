package guard

import (
	"encoding/base64"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/publicsuffix"
)

// emails finds local@domain where the domain ends in an ICANN public
// suffix (so icon@2x.png and lodash@4.17.21 are not addresses).
func (sc *scanner) emails() {
	s := sc.s
	from := 0
	for {
		k := strings.IndexByte(s[from:], '@')
		if k < 0 {
			return
		}
		at := from + k
		from = at + 1
		a := at
		for a > 0 && at-a < 64 && is(s[a-1], cLocal) {
			a--
		}
		for a < at && s[a] == '.' {
			a++
		}
		if a == at {
			continue
		}
		e := at + 1
		for e < len(s) && e-at < 254 && is(s[e], cHost) {
			e++
		}
		for e > at+1 && (s[e-1] == '.' || s[e-1] == '-') {
			e--
		}
		if e+1 < len(s) && s[e] == ':' && (is(s[e+1], cAlpha) || s[e+1] == '/' || s[e+1] == '~') {
			continue // an scp-style git remote, git@github.com:org/repo
		}
		dom := s[at+1 : e]
		dot := strings.LastIndexByte(dom, '.')
		if dot <= 0 || len(dom)-dot < 3 {
			continue
		}
		tld := dom[dot+1:]
		if !letters(tld) && !sc.loose {
			continue
		}
		if !emailDomain(dom) {
			if !sc.loose {
				continue
			}
			if e = looseDomain(s, at+1, e); e < 0 {
				continue
			}
		}
		sc.add(TypeEmail, a, e, 0.9)
		from = e
	}
}

// emailDomain reports a domain under an ICANN public suffix.
func emailDomain(dom string) bool {
	dot := strings.LastIndexByte(dom, '.')
	if dot <= 0 || len(dom)-dot < 3 || !letters(dom[dot+1:]) {
		return false
	}
	low := strings.ToLower(dom)
	suffix, icann := publicsuffix.PublicSuffix(low)
	return icann && suffix != low && !strings.Contains(low, "..")
}

// looseDomain finds, in binary data, the end of an email domain that
// starts at d and runs into the printable bytes after it (up to e): the
// longest prefix of the last label that completes a valid domain
// (example.orgPK), else the domain without its last one or two labels
// (example.org.txt). It returns -1 when there is none.
func looseDomain(s string, d, e int) int {
	dot := strings.LastIndexByte(s[d:e], '.')
	if dot < 0 {
		return -1
	}
	last := d + dot + 1
	for k := e - 1; k >= last+2; k-- {
		if emailDomain(s[d:k]) {
			return k
		}
	}
	for n := 0; n < 2; n++ {
		if e = d + strings.LastIndexByte(s[d:e], '.'); e <= d {
			return -1
		}
		if emailDomain(s[d:e]) {
			return e
		}
	}
	return -1
}

func letters(s string) bool {
	for i := 0; i < len(s); i++ {
		if !is(s[i], cAlpha) {
			return false
		}
	}
	return s != ""
}

// dbSchemes are URL schemes of databases and brokers.
var dbSchemes = map[string]bool{
	"postgres": true, "postgresql": true, "mysql": true, "mariadb": true, "mongodb": true,
	"mongodb+srv": true, "redis": true, "rediss": true, "amqp": true, "amqps": true, "mssql": true,
	"sqlserver": true, "cockroachdb": true, "clickhouse": true, "couchdb": true, "neo4j": true,
	"neo4j+s": true, "bolt": true, "cassandra": true, "memcached": true, "nats": true, "kafka": true,
	"oracle": true, "db2": true, "snowflake": true, "elasticsearch": true, "influxdb": true,
}

// urls finds scheme://user:password@host... A database scheme gives
// DATABASE_URL, any other URL_CREDENTIALS. The whole URL is the finding
// (host and database names are internal details too). A placeholder
// password (${VAR}, <password>, ...) is not a secret.
func (sc *scanner) urls() {
	s := sc.s
	from := 0
	for {
		k := strings.Index(s[from:], "://")
		if k < 0 {
			return
		}
		p := from + k
		from = p + 3
		a := p
		for a > 0 && p-a < 20 && (is(s[a-1], cAlnum) || s[a-1] == '+' || s[a-1] == '.' || s[a-1] == '-') {
			a--
		}
		if a == p || !is(s[a], cAlpha) {
			continue
		}
		scheme := strings.ToLower(s[a:p])
		// userinfo: up to the first '@', with no '/' before it
		q := p + 3
		for q < len(s) && q-p < maxURL && urlChar(s[q]) && s[q] != '@' && s[q] != '/' {
			q++
		}
		if q >= len(s) || s[q] != '@' {
			continue
		}
		// the authority ends at the first "/?#" after that '@'; the
		// password ends at its last '@'
		e := q
		at := q
		for e < len(s) && e-p < maxURL && urlChar(s[e]) && s[e] != '/' && s[e] != '?' && s[e] != '#' {
			if s[e] == '@' {
				at = e
			}
			e++
		}
		user, pass, ok := strings.Cut(s[p+3:at], ":")
		if !ok || pass == "" || user == "" && pass == "" || placeholder(pass) {
			continue
		}
		for e < len(s) && e-p < maxURL && urlChar(s[e]) {
			e++
		}
		for e > p+3 && strings.IndexByte(".,;:!?)]}'\"", s[e-1]) >= 0 {
			e--
		}
		typ := TypeURLCredentials
		if dbSchemes[scheme] {
			typ = TypeDatabaseURL
		}
		sc.add(typ, a, e, 0.95)
		from = e
	}
}

// maxURL bounds the URL token examined after "://".
const maxURL = 2048

func urlChar(c byte) bool { return is(c, cURL) }

// maxPEM bounds a private key block.
const maxPEM = 64 << 10

// pems finds PEM private key blocks: BEGIN line through END line, or when
// the END line is missing, through the base64 body that follows.
func (sc *scanner) pems() {
	s := sc.s
	from := 0
	end := 0 // the next "-----END " at or after from; -1: none left
	for {
		k := strings.Index(s[from:], "-----BEGIN ")
		if k < 0 {
			return
		}
		b := from + k
		from = b + 11
		le := strings.Index(s[from:min(len(s), from+69)], "-----")
		if le < 0 {
			continue
		}
		label := s[from : from+le]
		if !strings.Contains(label, "PRIVATE KEY") || strings.ContainsAny(label, "\r\n") {
			continue
		}
		hdrEnd := from + le + 5
		if end >= 0 && end < hdrEnd {
			if x := strings.Index(s[hdrEnd:], "-----END "); x >= 0 {
				end = hdrEnd + x
			} else {
				end = -1
			}
		}
		if end >= 0 && end-hdrEnd < maxPEM {
			e := end + 9
			if y := strings.Index(s[e:min(len(s), e+69)], "-----"); y >= 0 {
				e += y + 5
				sc.add(TypePrivateKey, b, e, 0.99)
				from = e
				continue
			}
		}
		e := pemBody(s, hdrEnd)
		if x := strings.IndexFunc(s[e:], func(r rune) bool { return !unicode.IsSpace(r) }); x >= 0 && strings.HasPrefix(s[e+x:], "-----END ") {
			if y := strings.Index(s[e+x+9:min(len(s), e+x+9+69)], "-----"); y >= 0 {
				e += x + 9 + y + 5
			}
		}
		sc.add(TypePrivateKey, b, e, 0.9)
		from = e
	}
}

// pemBody returns the end of the base64 and header lines after i (not
// bounded: a body is redacted however long it runs).
func pemBody(s string, i int) int {
	// the rest of the BEGIN line belongs to the block
	nl := strings.IndexByte(s[i:], '\n')
	if nl < 0 {
		return len(s)
	}
	e := i + len(strings.TrimRight(s[i:i+nl], " \r\t"))
	first := i + nl + 1
	for p := first; p < len(s); {
		nl := strings.IndexByte(s[p:], '\n')
		line := s[p:]
		next := len(s)
		if nl >= 0 {
			line = s[p : p+nl]
			next = p + nl + 1
		}
		t := strings.TrimSpace(line)
		ok := t == "" && p == first || strings.Contains(t, ": ") && p-first < 256
		if !ok && t != "" {
			ok = pemBodyLine(t)
		}
		if !ok {
			break
		}
		e = p + len(strings.TrimRight(line, " \r\t"))
		if nl < 0 {
			e = len(s)
		}
		p = next
	}
	return e
}

// maybeKey is a cheap prefilter for keyKind: a secret-like key name holds
// one of these letters pairs.
func maybeKey(k []byte) bool {
	for i := 0; i+1 < len(k); i++ {
		switch n := k[i+1]; k[i] {
		case 'p':
			if n == 'a' || n == 'w' {
				return true
			}
		case 's':
			if n == 'e' {
				return true
			}
		case 't':
			if n == 'o' {
				return true
			}
		case 'k':
			if n == 'e' {
				return true
			}
		case 'a':
			if n == 'u' {
				return true
			}
		case 'c':
			if n == 'r' {
				return true
			}
		}
	}
	return false
}

// Key names in assignments.
func keyKind(key string) string {
	switch {
	case strings.Contains(key, "password"), strings.Contains(key, "passwd"), strings.Contains(key, "passphrase"),
		key == "pwd", strings.HasSuffix(key, "_pwd"), key == "pass", strings.HasSuffix(key, "_pass"):
		return TypePassword
	case strings.Contains(key, "secret") && (strings.Contains(key, "aws") || strings.Contains(key, "access")):
		return TypeAWSSecretKey
	case strings.Contains(key, "secret"), strings.Contains(key, "token"), strings.Contains(key, "apikey"),
		strings.Contains(key, "api_key"), strings.Contains(key, "access_key"), strings.Contains(key, "private_key"),
		strings.Contains(key, "auth"), strings.Contains(key, "credential"), strings.HasSuffix(key, "_key"), key == "key":
		return TypeAPIKey
	}
	return ""
}

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
// key name (key, sort_key, auth) needs a value with no separators.
func (sc *scanner) value(kind string, weak bool, i int) int {
	s := sc.s
	n := len(s)
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
	if q := s[i]; q == '"' || q == '\'' || q == '`' {
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
		if len(v) < 6 || entropy(v) < 2.5 || identPath(v) {
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

// ipv6 checks the run of hex digits, ':' and '.' around the ':' at i. It
// returns the run's end if it is an address: netip parses it, it stands
// alone (not std::x or a[1::2]), it has a digit, and a "::" form has a
// group of 3+ hex digits (so abc::def and 1::2 are code). Loopback and
// unspecified addresses are not findings.
func (sc *scanner) ipv6(i int) int {
	s := sc.s
	a := i
	for a > 0 && i-a < 40 && (is(s[a-1], cHex) || s[a-1] == ':') {
		a--
	}
	e := i
	for e < len(s) && e-a < 46 && (is(s[e], cHex) || s[e] == ':' || s[e] == '.') {
		e++
	}
	for e > i && s[e-1] == '.' {
		e--
	}
	if a > 0 && (is(s[a-1], cAlnum) || s[a-1] == '_' || s[a-1] == '.') {
		return 0
	}
	if e < len(s) && (is(s[e], cAlnum) || s[e] == '_') {
		return 0
	}
	run := s[a:e]
	if strings.Count(run, ":") < 2 {
		return 0
	}
	digit := false
	long := false
	g := 0
	for k := 0; k <= len(run); k++ {
		if k == len(run) || run[k] == ':' {
			if g >= 3 {
				long = true
			}
			g = 0
			continue
		}
		g++
		digit = digit || is(run[k], cDigit)
	}
	if !digit || strings.Contains(run, "::") && !long {
		return 0
	}
	addr, err := netip.ParseAddr(run)
	if err != nil || !addr.Is6() || addr.IsLoopback() || addr.IsUnspecified() {
		return 0
	}
	sc.add(TypeIPAddress, a, e, 0.8)
	return e
}

// minBase64 is the shortest run worth decoding (18 bytes of text).
const minBase64 = 24

// base64Runs decodes runs of base64 (standard or URL alphabet) that look
// like encoded text and scans the text; if it holds a finding, the whole
// run is one finding of that type.
func (sc *scanner) base64Runs() {
	s := sc.s
	n := len(s)
	for i := 0; i < n; {
		if !is(s[i], cB64) {
			i++
			continue
		}
		j := i + 1
		for j < n && is(s[j], cB64) {
			j++
		}
		for k := 0; k < 2 && j < n && s[j] == '='; k++ {
			j++
		}
		if j-i >= minBase64 {
			sc.base64Run(i, j)
		}
		i = j
	}
}

func (sc *scanner) base64Run(i, j int) {
	run := sc.s[i:j]
	body := strings.TrimRight(run, "=")
	if strings.IndexByte(body, '=') >= 0 {
		return
	}
	// encoded text has both cases and isn't one identifier
	_, u, l := mix(body)
	if !u || !l {
		return
	}
	url := strings.ContainsAny(body, "-_")
	if url && strings.ContainsAny(body, "+/") {
		return
	}
	enc := base64.RawStdEncoding
	if url {
		enc = base64.RawURLEncoding
	}
	if len(body)%4 == 1 {
		body = body[:len(body)-1]
	}
	dec, err := enc.DecodeString(body)
	if err != nil || !texty(dec) {
		return
	}
	fs := sc.g.scanView(string(dec), sc.depth+1, false)
	if len(fs) == 0 {
		return
	}
	sc.add(fs[0].Type, i, j, fs[0].Confidence*0.9)
}

// texty reports whether b is mostly printable UTF-8 text.
func texty(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	bad := 0
	for _, c := range b {
		if c < ' ' && c != '\n' && c != '\r' && c != '\t' || c == 0x7f {
			bad++
		}
	}
	return bad*20 <= len(b)
}
