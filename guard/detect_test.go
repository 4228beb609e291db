package guard

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func newTestGuard(t testing.TB, cfg Config) *Guard {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type detCase struct {
	name string
	in   string
	want string // the enforce output
}

// pos is a positive case: val inside tmpl (one %s) redacted as typ.
func pos(name, typ, tmpl, val string) detCase {
	in := strings.Replace(tmpl, "%s", val, 1)
	return detCase{name: name, in: in, want: strings.Replace(tmpl, "%s", Marker(typ), 1)}
}

// neg is a negative case: nothing found.
func neg(name, in string) detCase { return detCase{name: name, in: in, want: in} }

func runCases(t *testing.T, cases []detCase) {
	t.Helper()
	g := newTestGuard(t, Config{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, fs := g.Redact(ModeEnforce, c.in)
			if got != c.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q\nfindings %v", c.in, got, c.want, fs)
			}
		})
	}
}

func TestEmail(t *testing.T) {
	runCases(t, []detCase{
		pos("plain", TypeEmail, "contact %s today", "alice.smith+tag@mail.example.co.uk"),
		pos("angle", TypeEmail, "From: Bob <%s>", "bob@company.ie"),
		pos("sentence end", TypeEmail, "write to %s.", "x@y.com"),
		pos("upper", TypeEmail, "%s", "ALICE@EXEMPLAR.IE"),
		neg("retina asset", "icon@2x.png"),
		neg("npm version", "lodash@4.17.21 and react@18.2.0"),
		neg("no suffix", "user@localhost root@host.internal-name"),
		neg("decorator", "@app.route('/x')"),
		neg("private suffix only", "a@b.c"),
		neg("unknown tld", "foo@bar.notarealtld"),
		neg("RFC 2606 example domains", "alice@example.com bob@mail.example.org carol@EXAMPLE.NET"),
		neg("RFC 6761 reserved TLDs", "dev@app.test x@y.invalid root@box.localhost me@site.example"),
		pos("not an example domain", TypeEmail, "contact %s", "alice@myexample.com"),
	})
}

func TestPhone(t *testing.T) {
	runCases(t, []detCase{
		pos("ie mobile intl", TypePhone, "call %s now", "+353 87 123 4567"),
		pos("ie mobile national", TypePhone, "call %s now", "087 123 4567"),
		pos("ie dublin", TypePhone, "tel: %s", "01 234 5678"),
		pos("us parens", TypePhone, "phone %s.", "(212) 555-0123"),
		pos("us dashes", TypePhone, "phone %s", "212-555-0123"),
		pos("us dots", TypePhone, "phone %s", "212.555.0123"),
		pos("us intl", TypePhone, "phone %s", "+1 212 555 0123"),
		pos("uk intl", TypePhone, "ring %s", "+44 20 7946 0958"),
		pos("ie long subscriber", TypePhone, "mob %s", "087 1234567"),
		pos("ie parens", TypePhone, "tel %s", "(01) 8765432"),
		pos("ie compact intl", TypePhone, "tel:%s", "+353871234567"),
		pos("idd prefix", TypePhone, "tel %s", "00353 87 123 4567"),
		neg("status and bytes", `"GET / HTTP/1.1" 404 5123456`),
		neg("compact date", "build 20240115 done"),
		neg("version", "version 1.2.3 and 10.2.1"),
		neg("date", "2024-01-15 and 15.01.2024 and 01/15/2024"),
		neg("time", "12:34:56"),
		neg("plain number", "took 1234567 ms, order 2125550123"),
		neg("counting", "1 2 3 4 5 6 7 8 9 10"),
		neg("timestamp line", "2024-01-15 12:34:56.789 pid 12345 678"),
		neg("us without area", "555-0123"),
	})
}

func TestSSN(t *testing.T) {
	cases := []detCase{
		pos("dashes", TypeSSN, "id %s ok", "536-22-1234"),
		pos("bare with context", TypeSSN, "SSN: %s", "536221234"),
		pos("spaces with context", TypeSSN, "social security number %s", "536 22 1234"),
		neg("bare without context", "ref 536221234"),
		neg("spaces without context", "ref 536 22 1234"),
		neg("mixed separators", "536-22 1234"),
		neg("advertising 1", "078-05-1120"),
		neg("advertising 2", "219-09-9999"),
		neg("all same", "111-11-1111"),
	}
	for _, bad := range []string{"000-12-3456", "666-12-3456", "900-12-3456", "999-12-3456", "536-00-1234", "536-22-0000"} {
		cases = append(cases, neg("invalid "+bad, "ssn "+bad))
	}
	runCases(t, cases)
}

func TestPPSN(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	cases := []detCase{
		pos("facts example", TypePPSN, "PPSN %s.", "6433435F"),
		neg("wrong letter", "PPSN 6433435G"),
		neg("lowercase", "sha 6433435f"),
		neg("inside word", "x6433435F"),
		neg("bad suffix", "6433435FZ"),
	}
	for i, sfx := range []byte{0, 'A', 'B', 'H', 'W', 'T', 'X'} {
		v := fakePPSN(r, sfx)
		cases = append(cases, pos("generated "+string(rune('0'+i)), TypePPSN, "ppsn=%s", v))
	}
	runCases(t, cases)
}

func TestCard(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	cases := []detCase{
		pos("visa spaced", TypeCreditCard, "card %s exp", group4(fakeCard(r, "4", 16), " ")),
		pos("visa dashed", TypeCreditCard, "card %s", group4(fakeCard(r, "4", 16), "-")),
		pos("visa compact", TypeCreditCard, "card=%s", fakeCard(r, "4", 16)),
		pos("visa 19", TypeCreditCard, "card %s", fakeCard(r, "4", 19)),
		pos("mastercard 2-series", TypeCreditCard, "mc %s", group4(fakeCard(r, "2221", 16), " ")),
		pos("mastercard", TypeCreditCard, "mc %s", fakeCard(r, "55", 16)),
		pos("discover", TypeCreditCard, "d %s", fakeCard(r, "6011", 16)),
		pos("jcb", TypeCreditCard, "j %s", fakeCard(r, "3530", 16)),
		pos("diners", TypeCreditCard, "d %s", fakeCard(r, "305", 14)),
		pos("unionpay", TypeCreditCard, "u %s", fakeCard(r, "62", 17)),
		pos("maestro", TypeCreditCard, "m %s", fakeCard(r, "50", 12)),
		neg("float constant", "const x = 4503601774854144"),
		neg("power of two", "9007199254740992 and 4611686018427387904"),
		neg("no issuer", "id "+fakeCard(r, "99", 16)+" and "+fakeCard(r, "1", 16)),
		neg("wrong length", "visa "+fakeCard(r, "4", 15)),
		neg("ms timestamp", "ts 1700000000000"),
		neg("mixed separators", "4111-1111 1111-1111"),
		neg("decimal", "0.4111111111111111 and 4111111111111111.5"),
		neg("in word", "order_4111111111111111"),
	}
	amex := fakeCard(r, "37", 15)
	cases = append(cases, pos("amex 4-6-5", TypeCreditCard, "amex %s", amex[:4]+" "+amex[4:10]+" "+amex[10:]))
	bad := []byte(fakeCard(r, "4", 16))
	bad[15] = '0' + (bad[15]-'0'+1)%10
	cases = append(cases, neg("bad luhn", "card "+string(bad)))
	runCases(t, cases)
}

func TestIBAN(t *testing.T) {
	ie := fakeIBAN("IE", "AIBK93115212345678")
	de := fakeIBAN("DE", "370400440532013000")
	fr := fakeIBAN("FR", "20041010050500013M02606")
	gb := fakeIBAN("GB", "NWBK60161331926819")
	nl := fakeIBAN("NL", "ABNA0417164300")
	wrong := []byte(ie)
	wrong[3] = '0' + (wrong[3]-'0'+1)%10
	runCases(t, []detCase{
		pos("ie compact", TypeIBAN, "iban %s", ie),
		pos("ie spaced", TypeIBAN, "IBAN: %s, BIC AIBKIE2D", spaced(ie)),
		pos("de", TypeIBAN, "%s", spaced(de)),
		pos("fr", TypeIBAN, "(%s)", fr),
		pos("gb", TypeIBAN, "%s", gb),
		pos("nl", TypeIBAN, "%s", spaced(nl)),
		neg("wrong check", string(wrong)),
		neg("short", ie[:21]),
		neg("long", ie+"1"),
		neg("lowercase", strings.ToLower(ie)),
		neg("unknown country", "XX"+ie[2:]),
		neg("groups of 3", ie[:3]+" "+ie[3:6]+" "+ie[6:]),
	})
}

func TestIP(t *testing.T) {
	runCases(t, []detCase{
		pos("v4", TypeIPAddress, "from %s:", "10.1.2.3"),
		pos("v4 port", TypeIPAddress, "host=%s:8080", "192.168.0.10"),
		pos("v4 end", TypeIPAddress, "peer %s.", "203.0.113.7"),
		pos("v6 compressed", TypeIPAddress, "addr %s", "2001:db8:85a3::8a2e:370:7334"),
		pos("v6 full", TypeIPAddress, "addr [%s]:443", "2001:0db8:0000:0000:0000:ff00:0042:8329"),
		pos("v6 link local", TypeIPAddress, "addr %s", "fe80::1ff:fe23:4567:890a"),
		neg("version word", "version 1.2.3.4, Version: 10.0.19041.1"),
		neg("v prefix", "v1.2.3.4"),
		neg("oid", "OID 1.3.6.1.4.1.311"),
		neg("product token", "Chrome/1.2.3.4 Safari/537.36"),
		neg("loopback and any", "127.0.0.1 0.0.0.0 ::1 ::"),
		neg("mask", "255.255.255.0"),
		neg("leading zeros", "01.02.03.04"),
		neg("out of range", "1.2.3.256"),
		neg("cpp scope", "abc::def std::vector Foo::Bar1"),
		neg("slice", "a[1::2]"),
		neg("time", "12:34:56"),
		neg("mac", "00:1a:2b:3c:4d:5e"),
	})
}

func TestSecrets(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	gh := fakeGitHubToken(r, "ghp_")
	badgh := gh[:39] + string("0123456789"[(strings.IndexByte(alnumChars, gh[39])+1)%10])
	if badgh == gh {
		badgh = gh[:39] + "z"
	}
	cases := []detCase{
		pos("openai", TypeAPIKey, "OPENAI_API_KEY=%s", fakeOpenAI(r)),
		pos("openai legacy", TypeAPIKey, "key %s", "sk-"+randKey(r, 48)),
		pos("anthropic", TypeAPIKey, "x-api-key: %s", fakeAnthropic(r)),
		pos("slack", TypeAPIKey, "SLACK=%s", fakeSlack(r)),
		pos("stripe", TypeAPIKey, "stripe %s", fakeStripe(r)),
		pos("stripe restricted", TypeAPIKey, "stripe %s", "rk_"+"live_"+randKey(r, 24)),
		pos("generic key", TypeAPIKey, "api_key=%s&x=1", randKey(r, 32)),
		pos("bearer", TypeAPIKey, "Authorization: Bearer %s", randKey(r, 40)),
		pos("json secret", TypeAPIKey, `{"client_secret": "%s"}`, randKey(r, 24)),
		pos("github", TypeGitHubToken, "token %s", gh),
		pos("github oauth", TypeGitHubToken, "%s", fakeGitHubToken(r, "gho_")),
		pos("github bad checksum", TypeGitHubToken, "%s", badgh),
		pos("github fine-grained", TypeGitHubToken, "%s", "github_pat_"+randKey(r, 22)+"_"+randKey(r, 59)),
		pos("jwt", TypeJWT, "Authorization: %s", fakeJWT(r, `{"sub":"42"}`)),
		pos("aws key id", TypeAWSAccessKey, "aws_access_key_id = %s", fakeAWSKeyID(r)),
		pos("aws sts key id", TypeAWSAccessKey, "%s", "ASIA"+randFrom(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
		pos("aws secret", TypeAWSSecretKey, "aws_secret_access_key = %s", fakeAWSSecret(r)),
		pos("aws secret json", TypeAWSSecretKey, `{"SecretAccessKey": "%s"}`, fakeAWSSecret(r)),
		pos("php append", TypeAPIKey, `$apiToken .= "%s";`, randKey(r, 32)),
		pos("make conditional", TypeAPIKey, `API_TOKEN ?= "%s"`, randKey(r, 32)),
		pos("make shell", TypeAPIKey, `API_TOKEN ::= "%s"`, randKey(r, 32)),
		pos("go short", TypeAPIKey, "apiToken := `%s`", randKey(r, 32)),
		pos("fat arrow", TypeAPIKey, `  "apiToken" => "%s"`, randKey(r, 32)),
		pos("typed var", TypeAPIKey, `var apiToken string = "%s"`, randKey(r, 32)),
		pos("property call", TypeAPIKey, `System.setProperty("API_TOKEN", "%s")`, randKey(r, 32)),
		pos("xml element", TypeAPIKey, "<apiToken>\n    %s\n</apiToken>", randKey(r, 32)),
		pos("escaped json env", TypeAPIKey, `{"env": "API_TOKEN=%s\nDEBUG=true"}`, randKey(r, 32)),
		neg("comparisons", "if token <= max_tokens && tokens >= 3 || token == expected"),
		neg("xml plain", "<token>expired</token> <secret>none</secret>"),
		pos("password", TypePassword, "password=%s", "hunter22x"),
		pos("yaml password", TypePassword, `DB_PASSWORD: "%s"`, "Tr0ub4dor&3"),
		neg("sk kebab", "pip install sk-learn; sk-some-long-kebab-case-identifier-name"),
		neg("stripe publishable", "pk_live_"+randKey(r, 24)),
		neg("placeholder angle", "api_key=<YOUR_KEY>"),
		neg("placeholder env", "token=${GITHUB_TOKEN} secret=$API_SECRET"),
		neg("placeholder template", "secret: {{ .Values.secret }}"),
		neg("uuid", "token=550e8400-e29b-41d4-a716-446655440000"),
		neg("digest", "digest: sha256:"+randFrom(r, "0123456789abcdef", 64)),
		neg("sha1", "commit "+randFrom(r, "0123456789abcdef", 40)),
		neg("numbers", "max_tokens=4096 tokens: 12"),
		neg("code", `password = os.getenv("PW"); password=self.password; password: str; password=None`),
		neg("stars", "password=********"),
		neg("shell working directory", "PWD=/home/user\nOLDPWD=/tmp/build-42\nexport PWD=/srv/app/releases/2024-05-01"),
		pos("pwd not a path", TypePassword, "PWD=%s", "hunter22x"),
		neg("short github", "ghp_short"),
		neg("github placeholder", "ghp_"+strings.Repeat("x", 36)+" github_pat_"+strings.Repeat("x", 82)),
		pos("stripe test", TypeAPIKey, "%s", "sk_"+"test_"+randKey(r, 30)),
		pos("jwt mangled header", TypeJWT, "%s", "eyJhbGciOieee"+randKey(r, 20)+".eyJ"+randKey(r, 30)+"."+randKey(r, 20)),
		pos("jwt alg none", TypeJWT, "t = %s;", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ0ZXN0LXVzZXIifQ."),
		neg("not jwt", "eyJhbGciOi.notjwt eyJub3QganNvbg.eyJub3QganNvbg.sig"),
		neg("aws example id", "AKIAIOSFODNN7EXAMPLE"),
		neg("aws example secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
		neg("aws sha1 secret", "aws_secret_access_key = "+randFrom(r, "0123456789abcdef", 40)),
		neg("aws lowercase id", "AKIA"+strings.ToLower(randFrom(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 16))),
		neg("bare 40 random", "blob "+randKey(r, 40)),
	}
	runCases(t, cases)
	g := newTestGuard(t, Config{})
	if fs := g.Scan(badgh); len(fs) != 1 || fs[0].Confidence >= 0.9 {
		t.Errorf("bad checksum findings %v, want one at low confidence", fs)
	}
	if fs := g.Scan(gh); len(fs) != 1 || fs[0].Confidence < 0.9 {
		t.Errorf("good checksum findings %v, want one at high confidence", fs)
	}
}

func TestURLs(t *testing.T) {
	runCases(t, []detCase{
		pos("postgres", TypeDatabaseURL, "dsn %s ok", "postgres://app:s3cretPw@db.internal:5432/app?sslmode=disable"),
		pos("postgresql", TypeDatabaseURL, "DATABASE_URL=%s", "postgresql://u:p4ss@10.0.0.5/db"),
		pos("mysql", TypeDatabaseURL, "'%s'", "mysql://root:r00tpw@localhost:3306/shop"),
		pos("mongodb srv", TypeDatabaseURL, "%s", "mongodb+srv://admin:Xy9zq@cluster0.abcde.mongodb.net/test"),
		pos("redis no user", TypeDatabaseURL, "%s", "redis://:hunter22@cache:6379/0"),
		pos("amqp", TypeDatabaseURL, "%s.", "amqp://guest:gu3st@rabbit:5672/"),
		pos("at in password", TypeDatabaseURL, "%s", "postgres://u:p@ss@db/x"),
		pos("https basic", TypeURLCredentials, "clone %s", "https://user:pa55word@git.example.com/repo.git"),
		neg("placeholder", "postgres://user:${DB_PASSWORD}@host/db"),
		neg("no password", "postgres://user@host/db postgres://localhost/db"),
		neg("at in path", "https://example.com/a@b.png"),
	})
}

func TestPEM(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	key := pemBlock(r, 6)
	open := key[:strings.Index(key, "-----END")]
	open = strings.TrimRight(open, "\n")
	pub := strings.ReplaceAll(key, "RSA PRIVATE", "PUBLIC")
	runCases(t, []detCase{
		pos("block", TypePrivateKey, "key:\n%s\nnext line", key),
		pos("openssh", TypePrivateKey, "%s", strings.ReplaceAll(key, "RSA PRIVATE", "OPENSSH PRIVATE")),
		pos("json escaped", TypePrivateKey, `{"k":"%s"}`, strings.ReplaceAll(key, "\n", `\n`)),
		pos("truncated", TypePrivateKey, "%s\n$ ls", open),
		neg("public key", pub),
		neg("certificate", strings.ReplaceAll(key, "RSA PRIVATE KEY", "CERTIFICATE")),
	})
}

func TestBase64AndNFKC(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	enc := base64.StdEncoding.EncodeToString
	raw := make([]byte, 48)
	for i := range raw {
		raw[i] = byte(r.IntN(256))
	}
	card := fakeCard(r, "4", 16)
	full := strings.Map(func(c rune) rune {
		if c >= '0' && c <= '9' {
			return c - '0' + '０'
		}
		return c
	}, group4(card, " "))
	runCases(t, []detCase{
		pos("base64 email", TypeEmail, "data %s end", enc([]byte("contact alice@exemplar.ie please"))),
		pos("base64 aws", TypeAWSAccessKey, "b=%s", enc([]byte("id "+fakeAWSKeyID(r)+"\n"))),
		pos("base64url", TypeEmail, "t=%s", base64.RawURLEncoding.EncodeToString([]byte("<<bob@exemplar.ie>>??"))),
		neg("base64 binary", "blob "+enc(raw)),
		neg("base64 text", "msg "+enc([]byte("hello world, nothing to see here"))),
		pos("fullwidth at", TypeEmail, "mail %s!", "ａｌｉｃｅ＠ｅｘｅｍｐｌａｒ．ｉｅ"),
		pos("fullwidth digits", TypeCreditCard, "カード %s です", full),
		pos("zero width split", TypeEmail, "mail %s", "ali\u200bce@exem\u200bplar.ie"),
		neg("unicode text", "Grüße aus Köln — naïve café ① ﬁne"),
	})
}

func TestOverlaps(t *testing.T) {
	g := newTestGuard(t, Config{})
	in := "postgres://alice%40example.com:pw12345@db/x and alice@exemplar.ie"
	got, fs := g.Redact(ModeEnforce, in)
	want := Marker(TypeDatabaseURL) + " and " + Marker(TypeEmail)
	if got != want {
		t.Fatalf("got %q want %q (%v)", got, want, fs)
	}
	for i := 1; i < len(fs); i++ {
		if fs[i].Start < fs[i-1].End {
			t.Fatalf("overlapping findings %v", fs)
		}
	}
}

func TestGitRemoteIsNotEmail(t *testing.T) {
	runCases(t, []detCase{
		neg("scp remote", "git clone git@github.com:sandlot/sandlot.git"),
		pos("email then colon space", TypeEmail, "from: %s: hi", "bob@exemplar.ie"),
	})
}

// TestAdversarialLinear feeds inputs built to make a naive scanner
// quadratic; each must scan in well under a second.
func TestAdversarialLinear(t *testing.T) {
	g := newTestGuard(t, Config{})
	const n = 1 << 20
	for name, unit := range map[string]string{
		"urls":   "a://",
		"urls@":  "a://b@",
		"begins": "-----BEGIN " + "RSA PRIVATE KEY-----\n",
		"ends":   "-----END ",
		"ats":    "a@",
		"colons": "1:",
		"assign": "token=",
		"digits": "1 ",
		"b64":    "QUJD",
	} {
		text := strings.Repeat(unit, n/len(unit))
		start := time.Now()
		g.Scan(text)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: %v for 1 MiB", name, d)
		}
	}
}
