package guard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{{Mode: "loud"}, {Regions: []string{"XX"}}} {
		if _, err := New(cfg); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want invalid argument", cfg, err)
		}
	}
	g := newTestGuard(t, Config{})
	if g.mode != ModeEnforce || !cmp.Equal(g.regions, []string{"IE", "US"}) {
		t.Errorf("defaults: mode %q regions %v", g.mode, g.regions)
	}
}

type auditLog struct {
	mu     sync.Mutex
	events []Event
}

func (a *auditLog) audit(_ context.Context, ev Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
}

// findingsCounter reads the guard's sandlot.guard.findings counter.
type findingsCounter struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newFindingsCounter() *findingsCounter {
	r := sdkmetric.NewManualReader()
	return &findingsCounter{reader: r, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

// total returns the findings counted so far, of every type.
func (c *findingsCounter) total(t *testing.T) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := c.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "sandlot.guard.findings" {
				for _, p := range sum.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

// TestModes: the per-request override, then the request's tenant, then
// ModeFor, then the default. ModeFor (a store lookup in the daemon) is not
// called when the request carries its tenant.
func TestModes(t *testing.T) {
	const text = "mail alice@exemplar.ie now"
	key := []byte("k")
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("alice@exemplar.ie"))
	wantMAC := hex.EncodeToString(mac.Sum(nil))

	tenantModes := map[string]string{"quiet": ModeOff, "watch": ModeReport, "bogus": "nonsense"}
	var log auditLog
	counter := newFindingsCounter()
	g := newTestGuard(t, Config{
		Mode:    ModeEnforce,
		HMACKey: key,
		Audit:   log.audit,
		Meter:   counter.mp.Meter("test"),
		ModeFor: func(ctx context.Context, id string) string {
			if t, ok := tenant.From(ctx); ok && t.ID == id {
				panic("ModeFor called for the request's own tenant")
			}
			return tenantModes[id]
		},
	})
	ctx := context.Background()
	for _, c := range []struct {
		name, tenant string
		ctx          context.Context
		want         string
		events       int
	}{
		{"default enforce", "t1", ctx, "mail [REDACTED:EMAIL] now", 1},
		{"tenant off", "quiet", ctx, text, 0},
		{"tenant report", "watch", ctx, text, 1},
		{"unknown tenant mode fails closed", "bogus", ctx, "mail [REDACTED:EMAIL] now", 1},
		{"request override beats tenant", "quiet", WithMode(ctx, ModeEnforce), "mail [REDACTED:EMAIL] now", 1},
		{"request override to off", "t1", WithMode(ctx, ModeOff), text, 0},
		{"invalid override ignored", "watch", WithMode(ctx, "loud"), text, 1},
		// The request's tenant (tenant.With) decides, not ModeFor.
		{"request tenant off", "watch", tenant.With(ctx, &tenant.Tenant{ID: "watch", GuardMode: ModeOff}), text, 0},
		{"request tenant enforce", "quiet", tenant.With(ctx, &tenant.Tenant{ID: "quiet", GuardMode: ModeEnforce}), "mail [REDACTED:EMAIL] now", 1},
		{"request tenant without a mode: default", "quiet", tenant.With(ctx, &tenant.Tenant{ID: "quiet"}), "mail [REDACTED:EMAIL] now", 1},
		{"request tenant bogus mode fails closed", "t1", tenant.With(ctx, &tenant.Tenant{ID: "t1", GuardMode: "nonsense"}), "mail [REDACTED:EMAIL] now", 1},
		{"another tenant's request: ModeFor", "quiet", tenant.With(ctx, &tenant.Tenant{ID: "watch", GuardMode: ModeEnforce}), text, 0},
		{"override beats request tenant", "t1", WithMode(tenant.With(ctx, &tenant.Tenant{ID: "t1", GuardMode: ModeOff}), ModeEnforce), "mail [REDACTED:EMAIL] now", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			log.events = nil
			before := counter.total(t)
			if got := g.Text(c.ctx, c.tenant, text); got != c.want {
				t.Errorf("Text = %q, want %q", got, c.want)
			}
			if counted := counter.total(t) - before; len(log.events) != c.events || counted != int64(c.events) {
				t.Fatalf("events %v, %d counted, want %d", log.events, counted, c.events)
			}
			for _, ev := range log.events {
				want := Event{TenantID: c.tenant, Mode: ev.Mode, Type: TypeEmail, Start: 5, End: 22, HMAC: wantMAC}
				if diff := cmp.Diff(want, ev); diff != "" {
					t.Errorf("event (-want +got):\n%s", diff)
				}
				if strings.Contains(ev.HMAC, "alice") {
					t.Errorf("event holds the value")
				}
			}
		})
	}
}

func TestRedactModes(t *testing.T) {
	g := newTestGuard(t, Config{})
	in := "ip 10.0.0.7"
	if out, fs := g.Redact(ModeOff, in); out != in || fs != nil {
		t.Errorf("off: %q %v", out, fs)
	}
	if out, fs := g.Redact(ModeReport, in); out != in || len(fs) != 1 {
		t.Errorf("report: %q %v", out, fs)
	}
	if out, _ := g.Redact(ModeEnforce, in); out != "ip [REDACTED:IP_ADDRESS]" {
		t.Errorf("enforce: %q", out)
	}
}

func TestRandomHMACKey(t *testing.T) {
	a, b := newTestGuard(t, Config{}), newTestGuard(t, Config{})
	if string(a.key) == string(b.key) || len(a.key) != 32 {
		t.Errorf("keys not random per guard")
	}
}

func TestSanitizeError(t *testing.T) {
	in := strings.Join([]string{
		"open /run/sandlot/ctx-1/agent.sock: connection refused",
		"state at /var/lib/sandlot/db.sqlite, user alice@exemplar.ie",
		"panic: boom",
		"",
		"goroutine 17 [running]:",
		"main.run(0xc000012345)",
		"\t/home/builder/sandlot/cmd/sandlot/main.go:42 +0x1d",
		"created by main.main in goroutine 1",
		"\t/home/builder/sandlot/cmd/sandlot/main.go:12 +0x25",
		"",
		"at server.go:123 in handler",
		"python: can't open file '/home/user/x.py': [Errno 2]",
	}, "\n")
	got := SanitizeError(in)
	for _, bad := range []string{"/run/sandlot", "/var/lib/sandlot", "goroutine", "main.go", "server.go:123", "0xc000012345", "alice@"} {
		if strings.Contains(got, bad) {
			t.Errorf("sanitized error still holds %q:\n%s", bad, got)
		}
	}
	for _, keep := range []string{"connection refused", "panic: boom", "/home/user/x.py", "[REDACTED:EMAIL]", "in handler"} {
		if !strings.Contains(got, keep) {
			t.Errorf("sanitized error lost %q:\n%s", keep, got)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	g := newTestGuard(t, Config{})
	text, _ := logCorpus(64<<10, 3)
	want := g.Text(context.Background(), "t", text)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := g.Text(context.Background(), "t", text); got != want {
				t.Errorf("concurrent Text differs")
			}
		}()
	}
	wg.Wait()
}

// TestJSONStaysValid: redacting a JSON result leaves it parseable, with
// the secrets gone.
func TestJSONStaysValid(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	secrets := map[string]string{
		"email":  "alice@exemplar.ie",
		"dsn":    "postgres://app:S3cretpw@db:5432/app",
		"card":   group4(fakeCard(r, "4", 16), " "),
		"key":    pemBlock(r, 3),
		"token":  fakeGitHubToken(r, "ghp_"),
		"jwt":    fakeJWT(r, `{"sub":"1"}`),
		"phone":  "(212) 555-0123",
		"aws":    fakeAWSKeyID(r),
		"nested": "password=" + randKey(r, 12),
	}
	raw, err := json.Marshal(map[string]any{"result": secrets, "list": []string{secrets["email"], secrets["token"]}})
	if err != nil {
		t.Fatal(err)
	}
	g := newTestGuard(t, Config{})
	out := g.Text(context.Background(), "t", string(raw))
	if !json.Valid([]byte(out)) {
		t.Fatalf("redacted JSON is invalid: %s", out)
	}
	for name, v := range secrets {
		enc, _ := json.Marshal(v)
		if strings.Contains(out, strings.Trim(string(enc), `"`)) {
			t.Errorf("%s survived: %s", name, out)
		}
	}
}
