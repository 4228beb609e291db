package guard

import (
	"net/netip"
	"strings"

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

// emailDomain reports a domain under an ICANN public suffix that is not
// reserved for examples.
func emailDomain(dom string) bool {
	dot := strings.LastIndexByte(dom, '.')
	if dot <= 0 || len(dom)-dot < 3 || !letters(dom[dot+1:]) {
		return false
	}
	low := strings.ToLower(dom)
	suffix, icann := publicsuffix.PublicSuffix(low)
	return icann && suffix != low && !strings.Contains(low, "..") && !reservedDomain(low)
}

// reservedDomain reports a lower-case domain reserved for documentation
// and tests (RFC 2606, RFC 6761): example.com, example.net, example.org
// and their subdomains, and the .test, .invalid, .localhost and .example
// TLDs (which no public suffix lists, so emailDomain refuses them anyway).
// Addresses there belong to no one: docs, fixtures and sample data are
// full of them, and redacting them hides nothing.
func reservedDomain(dom string) bool {
	for _, d := range []string{"example.com", "example.net", "example.org"} {
		if dom == d || strings.HasSuffix(dom, "."+d) {
			return true
		}
	}
	tld := dom[strings.LastIndexByte(dom, '.')+1:]
	return tld == "test" || tld == "invalid" || tld == "localhost" || tld == "example"
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
