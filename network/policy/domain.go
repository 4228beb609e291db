package policy

import (
	"net"
	"strings"

	"golang.org/x/net/idna"
)

// NormalizeDomain returns name in the form rules compare: lower case,
// IDNA (punycode) ASCII, no trailing dot. With wildcard, a leading "*." is
// accepted ("*.example.org"); a bare "*" never is, since "everything" is
// mode open, not a rule.
func NormalizeDomain(name string, wildcard bool) (string, error) {
	orig := name
	name = strings.TrimSuffix(strings.TrimSpace(name), ".")
	star := false
	if wildcard && strings.HasPrefix(name, "*.") {
		star, name = true, name[2:]
	}
	if name == "" || name == "*" {
		return "", invalid("domain %q: a bare wildcard is not a rule (use mode open)", orig)
	}
	if strings.Contains(name, "*") {
		return "", invalid("domain %q: a wildcard may only be the whole first label (*.example.org)", orig)
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		// idna.Lookup refuses underscores, which real names (_acme-challenge,
		// service records) carry; fall back to the plain ASCII check below.
		ascii = strings.ToLower(name)
	}
	if err := checkHostname(ascii); err != nil {
		return "", invalid("domain %q: %v", orig, err)
	}
	if star {
		return "*." + ascii, nil
	}
	return ascii, nil
}

type nameError string

func (e nameError) Error() string { return string(e) }

func checkHostname(s string) error {
	if len(s) > maxNameLen {
		return nameError("longer than 253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" {
			return nameError("empty label")
		}
		if len(l) > 63 {
			return nameError("label longer than 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return nameError("label starts or ends with '-'")
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return nameError("invalid character " + string(rune(c)))
			}
		}
	}
	last := labels[len(labels)-1]
	allDigits := true
	for _, c := range []byte(last) {
		if c < '0' || c > '9' {
			allDigits = false
		}
	}
	if allDigits {
		return nameError("looks like an address, not a name")
	}
	return nil
}

// MatchDomain reports whether pattern (normalized; exact or "*.suffix")
// matches name (normalized). A wildcard matches subdomains at any depth,
// never the apex: "*.example.org" matches "a.b.example.org", not
// "example.org".
func MatchDomain(pattern, name string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return len(name) > len(suffix)+1 && strings.HasSuffix(name, suffix) && name[len(name)-len(suffix)-1] == '.'
	}
	return pattern == name
}

// CanonicalName normalizes a name seen on the wire (SNI, Host header, DNS
// question) for matching. It reports false for anything that is not a
// plain host name, so a malformed name matches no rule.
func CanonicalName(name string) (string, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" || checkHostname(name) != nil {
		return "", false
	}
	return name, true
}

// OneLabelUnder reports whether host (a name, or name:port, as in a Host
// header) is exactly one label under domain (lower-case, no trailing
// dot), as the ports route's <port>-<id>.<domain> is. It returns host
// lower-case without its port and trailing dot, and that label.
func OneLabelUnder(host, domain string) (name, label string, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	name = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok = strings.CutSuffix(name, "."+domain)
	ok = ok && domain != "" && label != "" && !strings.Contains(label, ".")
	return name, label, ok
}
