package guard

import (
	"encoding/base64"
	"strings"
	"unicode"
	"unicode/utf8"
)

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
	fs := sc.g.scanView(string(dec), sc.depth+1, false, 0)
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
