package guard

import (
	"encoding/base64"
	"encoding/json"
	"hash/crc32"
	"strings"
)

// words walks runs of [A-Za-z0-9_-] and checks the ones whose prefix can
// start a secret (sk-, ghp_, AKIA, eyJ, xoxb-, ...) or an IBAN.
func (sc *scanner) words() {
	s := sc.s
	n := len(s)
	for i := 0; i < n; {
		if !is(s[i], cWord) {
			i++
			continue
		}
		j := i + 1
		for j < n && is(s[j], cWord) {
			j++
		}
		if j-i >= 4 {
			if e := sc.word(i, j); e > j {
				j = e
			}
		}
		i = j
	}
}

// word checks the word s[i:j]; it returns the end of a finding that runs
// past j (JWT, spaced IBAN) or 0.
func (sc *scanner) word(i, j int) int {
	s := sc.s
	w := s[i:j]
	switch c := w[0]; {
	case c == 's' && strings.HasPrefix(w, "sk-"):
		sc.openAI(i, w)
	case (c == 's' || c == 'r') && len(w) > 8 && w[1] == 'k' && w[2] == '_':
		sc.stripe(i, w)
	case c == 'x' && len(w) >= 15 && strings.HasPrefix(w, "xox") && strings.IndexByte("abprse", w[3]) >= 0 && w[4] == '-':
		if d, _, _ := mix(w[5:]); d {
			sc.add(TypeAPIKey, i, j, 0.9)
		}
	case c == 'g':
		sc.github(i, w)
	case c == 'e' && strings.HasPrefix(w, "eyJ"):
		return sc.jwt(i, j)
	}
	if is(w[0], cUpper) {
		sc.awsKeyID(i, w)
		if len(w) >= 4 && is(w[1], cUpper) && is(w[2], cDigit) && is(w[3], cDigit) {
			return sc.iban(i)
		}
	}
	return 0
}

func alnumOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if !is(s[i], cAlnum) {
			return false
		}
	}
	return true
}

// openAI matches sk-..., sk-proj-..., sk-ant-... (Anthropic). The body must
// look random: letters and digits of both cases, so kebab-case names like
// sk-learn-something don't match.
func (sc *scanner) openAI(i int, w string) {
	body := w[3:]
	for _, p := range []string{"ant-", "proj-", "svcacct-", "admin-"} {
		if strings.HasPrefix(body, p) {
			body = body[len(p):]
			break
		}
	}
	if len(body) < 20 {
		return
	}
	d, u, l := mix(body)
	if d && u && l && entropy(body) >= 3.5 {
		sc.add(TypeAPIKey, i, i+len(w), 0.95)
	}
}

// stripe matches secret and restricted keys: sk_live_/rk_live_ (and
// sk_prod_), and test-mode sk_test_/rk_test_ at lower confidence. Publishable
// pk_ keys are public.
func (sc *scanner) stripe(i int, w string) {
	conf := 0.95
	var body string
	switch {
	case strings.HasPrefix(w[3:], "live_"), strings.HasPrefix(w[3:], "prod_"):
		body = w[8:]
	case strings.HasPrefix(w[3:], "test_"):
		body, conf = w[8:], 0.8
	default:
		return
	}
	if len(body) >= 16 && alnumOnly(body) && entropy(body) >= 3 {
		sc.add(TypeAPIKey, i, i+len(w), conf)
	}
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// githubChecksum is the 6-character base62 CRC32 of a token's random part.
func githubChecksum(random string) string {
	v := crc32.ChecksumIEEE([]byte(random))
	var b [6]byte
	for k := 5; k >= 0; k-- {
		b[k] = base62[v%62]
		v /= 62
	}
	return string(b[:])
}

// github matches gh[pousr]_ + 30 random + 6 checksum, and github_pat_.
// A wrong checksum still counts (someone's typo of a token is still
// sensitive) at lower confidence.
func (sc *scanner) github(i int, w string) {
	if len(w) == 40 && w[1] == 'h' && strings.IndexByte("pousr", w[2]) >= 0 && w[3] == '_' && alnumOnly(w[4:]) && entropy(w[4:]) >= 3 {
		conf := 0.6
		if githubChecksum(w[4:34]) == w[34:] {
			conf = 0.99
		}
		sc.add(TypeGitHubToken, i, i+40, conf)
		return
	}
	if sc.loose && len(w) > 40 && w[1] == 'h' && strings.IndexByte("pousr", w[2]) >= 0 && w[3] == '_' &&
		alnumOnly(w[4:40]) && githubChecksum(w[4:34]) == w[34:40] {
		sc.add(TypeGitHubToken, i, i+40, 0.99) // glued to what follows it
		return
	}
	if strings.HasPrefix(w, "github_pat_") && len(w) >= 70 && entropy(w[11:]) >= 3 {
		sc.add(TypeGitHubToken, i, i+len(w), 0.95)
	}
}

// glued finds, in binary data, GitHub tokens (by their checksum) and AWS
// key ids that run on from the printable bytes before them, where words
// does not see them start.
func (sc *scanner) glued() {
	s := sc.s
	for from := 0; ; {
		k := strings.IndexByte(s[from:], '_')
		if k < 0 {
			break
		}
		u := from + k
		from = u + 1
		if u < 3 || u+37 > len(s) || s[u-3] != 'g' || s[u-2] != 'h' || strings.IndexByte("pousr", s[u-1]) < 0 {
			continue
		}
		if body := s[u+1 : u+37]; alnumOnly(body) && githubChecksum(body[:30]) == body[30:] {
			sc.add(TypeGitHubToken, u-3, u+37, 0.99)
		}
	}
	for _, p := range []string{"AKIA", "ASIA", "ABIA", "ACCA"} {
		for from := 0; ; {
			k := strings.Index(s[from:], p)
			if k < 0 {
				break
			}
			i := from + k
			from = i + 4
			if i > 0 && i+20 <= len(s) && is(s[i-1], cWord) {
				sc.awsKeyID(i, s[i:i+20])
			}
		}
	}
}

// awsKeyID matches AKIA/ASIA/ABIA/ACCA + 16 of [A-Z2-7]. AWS's documented
// example ids (ending in EXAMPLE) are not live keys and don't match.
func (sc *scanner) awsKeyID(i int, w string) {
	if len(w) != 20 && !(sc.loose && len(w) > 20) {
		return
	}
	w = w[:20]
	switch w[:4] {
	case "AKIA", "ASIA", "ABIA", "ACCA":
	default:
		return
	}
	for k := 4; k < 20; k++ {
		c := w[k]
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return
		}
	}
	if strings.HasSuffix(w, "EXAMPLE") {
		return
	}
	sc.add(TypeAWSAccessKey, i, i+20, 0.95)
}

// jwt matches eyJ<header>.eyJ<payload>.<signature>: at confidence 0.95
// when the header decodes to a JSON object with "alg", else 0.7 when both
// parts are 17+ characters (a mangled header is still a token).
func (sc *scanner) jwt(i, j int) int {
	s := sc.s
	n := len(s)
	if j+4 >= n || s[j] != '.' || !strings.HasPrefix(s[j+1:], "eyJ") {
		return 0
	}
	k := j + 1
	for k < n && is(s[k], cWord) {
		k++
	}
	if k >= n || s[k] != '.' {
		return 0
	}
	e := k + 1
	for e < n && is(s[e], cWord) {
		e++
	}
	conf := 0.7 // the eyJ.eyJ. shape alone is specific
	if hdr, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s[i:j], "=")); err == nil {
		var h map[string]any
		if json.Unmarshal(hdr, &h) == nil {
			if _, ok := h["alg"]; ok {
				conf = 0.95
			}
		}
	}
	if conf < 0.9 && (j-i < 17 || k-j-1 < 17) {
		return 0
	}
	sc.add(TypeJWT, i, e, conf)
	return e
}

// ibanLen is the IBAN length per country (ISO 13616 registry).
var ibanLen = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
	"BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
	"EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
	"GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
	"LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
	"NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
	"RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// iban matches an IBAN at i, compact or in groups of 4 separated by single
// spaces, at its country's exact length, with a valid mod-97 check.
func (sc *scanner) iban(i int) int {
	s := sc.s
	n := len(s)
	want, ok := ibanLen[s[i:i+2]]
	if !ok {
		return 0
	}
	var buf [34]byte
	pos, k := 0, i
	for pos < want && k < n {
		c := s[k]
		if is(c, cUpper|cDigit) {
			buf[pos] = c
			pos++
			k++
			continue
		}
		if c == ' ' && pos%4 == 0 && k+1 < n && is(s[k+1], cUpper|cDigit) {
			k++
			continue
		}
		break
	}
	if pos != want || (k < n && is(s[k], cAlnum)) {
		return 0
	}
	if !ibanValid(string(buf[:pos])) {
		return 0
	}
	sc.add(TypeIBAN, i, k, 0.95)
	return k
}

// ibanValid checks the mod-97 rule on a compact IBAN.
func ibanValid(v string) bool {
	if len(v) < 5 {
		return false
	}
	r := v[4:] + v[:4]
	m := 0
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c >= '0' && c <= '9':
			m = (m*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			m = (m*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return m == 1
}
