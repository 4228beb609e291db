package guard

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
)

// Secret fixtures are generated at test time, so no real-looking secret is
// committed. Each generator computes its own check digits.

const alnumChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randFrom(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// randKey is random base62 with at least one digit, upper and lower.
func randKey(r *rand.Rand, n int) string {
	for {
		k := randFrom(r, alnumChars, n)
		if d, u, l := mix(k); d && u && l {
			return k
		}
	}
}

func fakeGitHubToken(r *rand.Rand, prefix string) string {
	body := randFrom(r, alnumChars, 30)
	return prefix + body + githubChecksum(body)
}

func fakeAWSKeyID(r *rand.Rand) string {
	return "AKIA" + randFrom(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
}

func fakeAWSSecret(r *rand.Rand) string {
	return randKey(r, 30) + "/+" + randKey(r, 8)
}

func fakeOpenAI(r *rand.Rand) string    { return "sk-proj-" + randKey(r, 48) }
func fakeAnthropic(r *rand.Rand) string { return "sk-" + "ant-api03-" + randKey(r, 40) }
func fakeSlack(r *rand.Rand) string {
	return "xox" + "b-" + randFrom(r, "0123456789", 11) + "-" + randKey(r, 24)
}
func fakeStripe(r *rand.Rand) string { return "sk_" + "live_" + randKey(r, 24) }

func fakeJWT(r *rand.Rand, payload string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString([]byte(randKey(r, 32)))
}

// pemHeader is split so the file holds no PEM marker.
func pemBlock(r *rand.Rand, lines int) string {
	var b strings.Builder
	b.WriteString("-----BEGIN " + "RSA PRIVATE" + " KEY-----\n")
	for i := 0; i < lines; i++ {
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(randFrom(r, alnumChars, 48))))
		b.WriteString("\n")
	}
	b.WriteString("-----END " + "RSA PRIVATE" + " KEY-----")
	return b.String()
}

// fakeIBAN computes the check digits for country and bban.
func fakeIBAN(country, bban string) string {
	var num strings.Builder
	for _, c := range bban + country + "00" {
		if c >= 'A' && c <= 'Z' {
			fmt.Fprintf(&num, "%d", c-'A'+10)
		} else {
			num.WriteRune(c)
		}
	}
	n, _ := new(big.Int).SetString(num.String(), 10)
	check := 98 - new(big.Int).Mod(n, big.NewInt(97)).Int64()
	return fmt.Sprintf("%s%02d%s", country, check, bban)
}

// spaced groups a compact IBAN in fours.
func spaced(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i += 4 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v[i:min(len(v), i+4)])
	}
	return b.String()
}

func fakePPSN(r *rand.Rand, suffix byte) string {
	d := randFrom(r, "0123456789", 7)
	s := d + string(ppsnCheck(d, suffix))
	if suffix != 0 {
		s += string(suffix)
	}
	return s
}

// fakeCard makes a Luhn-valid number with prefix and length.
func fakeCard(r *rand.Rand, prefix string, n int) string {
	for {
		d := prefix + randFrom(r, "0123456789", n-len(prefix)-1)
		for c := byte('0'); c <= '9'; c++ {
			if luhn([]byte(d + string(c))) {
				return d + string(c)
			}
		}
	}
}

func group4(d, sep string) string {
	var parts []string
	for i := 0; i < len(d); i += 4 {
		parts = append(parts, d[i:min(len(d), i+4)])
	}
	return strings.Join(parts, sep)
}
