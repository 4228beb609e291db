package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// parseServe parses serve's flags as runServe does.
func parseServe(t *testing.T, args ...string) (serveConfig, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c serveConfig
	c.registerServe(fs)
	err := c.parse(fs, args)
	return c, err
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrecedence: a flag beats $SANDLOT_<NAME>, which beats the
// config file, which beats the default; YAML and TOML files both work.
func TestConfigPrecedence(t *testing.T) {
	yaml := writeFile(t, "sandlot.yaml", "context-ttl: 3m\nmax-executions: 30\npool-sizes:\n  python: 3\n")
	toml := writeFile(t, "sandlot.toml", "context-ttl = \"3m\"\nmax-executions = 30\npool-sizes = \"python=3\"\n")
	for _, file := range []string{yaml, toml} {
		for _, tc := range []struct {
			name     string
			file     bool
			env      string
			flag     string
			wantTTL  time.Duration
			wantExec int64
		}{
			{name: "default", wantTTL: contexts.DefaultTTL, wantExec: contexts.DefaultMaxExecutions},
			{name: "file", file: true, wantTTL: 3 * time.Minute, wantExec: 30},
			{name: "env beats file", file: true, env: "2m", wantTTL: 2 * time.Minute, wantExec: 30},
			{name: "flag beats env", file: true, env: "2m", flag: "1m", wantTTL: time.Minute, wantExec: 30},
		} {
			t.Run(filepath.Ext(file)+"/"+tc.name, func(t *testing.T) {
				t.Setenv(envConfig, "")
				var args []string
				if tc.file {
					args = append(args, "--config", file)
				}
				if tc.env != "" {
					t.Setenv("SANDLOT_CONTEXT_TTL", tc.env)
				}
				if tc.flag != "" {
					args = append(args, "--context-ttl", tc.flag)
				}
				c, err := parseServe(t, args...)
				if err != nil {
					t.Fatal(err)
				}
				if c.ContextTTL != tc.wantTTL || c.MaxExecutions != tc.wantExec {
					t.Errorf("TTL %s, executions %d; want %s, %d", c.ContextTTL, c.MaxExecutions, tc.wantTTL, tc.wantExec)
				}
				if tc.file {
					if diff := cmp.Diff(map[string]int{"python": 3}, c.PoolSizes); diff != "" {
						t.Errorf("pool sizes (-want +got):\n%s", diff)
					}
				}
			})
		}
	}
}

// TestConfigFileFromEnv: $SANDLOT_CONFIG names the file when --config is
// not given.
func TestConfigFileFromEnv(t *testing.T) {
	t.Setenv(envConfig, writeFile(t, "c.yaml", "cleanup-interval: 7s\n"))
	c, err := parseServe(t)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CleanupInterval; got != 7*time.Second {
		t.Fatalf("cleanup interval %s, want 7s", got)
	}
}

// TestConfigErrors: an unknown key and bad values are usage errors (exit
// 2) that name where the value came from.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string // YAML
		env  map[string]string
		args []string
		want string // in the message
	}{
		{name: "unknown key", file: "context-tll: 3m\n", want: "unknown key context-tll"},
		{name: "config in the file", file: "config: other.yaml\n", want: "unknown key config"},
		{name: "bad duration in file", file: "context-ttl: abc\n", want: "key context-ttl"},
		{name: "bad duration in env", env: map[string]string{"SANDLOT_CLEANUP_INTERVAL": "abc"}, want: "$SANDLOT_CLEANUP_INTERVAL"},
		{name: "negative TTL flag", args: []string{"--context-ttl", "-5m"}, want: "--context-ttl must be positive"},
		{name: "negative TTL env", env: map[string]string{"SANDLOT_CONTEXT_TTL": "-1s"}, want: "--context-ttl must be positive"},
		{name: "negative idle suspend", args: []string{"--idle-suspend", "-1m"}, want: "--idle-suspend must not be negative"},
		{name: "zero executions", args: []string{"--max-executions", "0"}, want: "--max-executions"},
		{name: "lease ttl too short", args: []string{"--lease-ttl", "1s"}, want: "--lease-ttl must be 3s or more"},
		{name: "default above max", args: []string{"--exec-timeout", "20m"}, want: "above --max-exec-timeout"},
		{name: "guard mode", env: map[string]string{"SANDLOT_GUARD_MODE": "lax"}, want: "--guard-mode"},
		{name: "pool sizes", args: []string{"--pool-sizes", "python"}, want: "NAME=N"},
		{name: "not a number", file: "pool-size: many\n", want: "key pool-size"},
		{name: "missing file", args: []string{"--config", "/nonexistent/sandlot.yaml"}, want: "/nonexistent/sandlot.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envConfig, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, "c.yaml", tc.file))
			}
			_, err := parseServe(t, args...)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.ExitCode(err) != 2 {
				t.Errorf("error %v is not a usage error (exit %d)", err, errdefs.ExitCode(err))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestConfigSharedFile: serve and mcp read one file; a key only serve has
// (addr) is no error for mcp, and both take the daemon's keys.
func TestConfigSharedFile(t *testing.T) {
	file := writeFile(t, "c.yaml", "addr: 127.0.0.1:9999\ncontext-ttl: 4m\n")
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c serveConfig
	c.registerDaemon(fs, daemonDefaults{})
	if err := c.parse(fs, []string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	if c.ContextTTL != 4*time.Minute {
		t.Fatalf("mcp TTL %s, want 4m", c.ContextTTL)
	}
}

// TestConfigDocumented: docs/configuration.md lists every knob of serve
// and mcp with its flag and its environment variable, so a new flag
// cannot go undocumented.
func TestConfigDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	var c serveConfig
	c.registerServe(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(doc, "`--"+f.Name+"`") {
			t.Errorf("docs/configuration.md lacks `--%s`", f.Name)
		}
		if f.Name != "config" && !strings.Contains(doc, "`"+envName(f.Name)+"`") {
			t.Errorf("docs/configuration.md lacks `%s`", envName(f.Name))
		}
	})
}

// TestKnobsReachTheirConsumer: each knob of the daemon, set by its
// environment variable, lands in the field of daemon.Config that carries
// it to its consumer (daemon's TestConfigReachesConsumers follows each on
// to contexts.Config and local.Config).
func TestKnobsReachTheirConsumer(t *testing.T) {
	for _, tc := range []struct {
		env, val string
		got      func(daemon.Config) any
		want     any
	}{
		{"SANDLOT_CONTEXT_TTL", "11m", func(c daemon.Config) any { return c.ContextTTL }, 11 * time.Minute},
		{"SANDLOT_CLEANUP_INTERVAL", "12s", func(c daemon.Config) any { return c.CleanupInterval }, 12 * time.Second},
		{"SANDLOT_EXEC_TIMEOUT", "13s", func(c daemon.Config) any { return c.ExecTimeout }, 13 * time.Second},
		{"SANDLOT_MAX_EXEC_TIMEOUT", "14m", func(c daemon.Config) any { return c.MaxExecTimeout }, 14 * time.Minute},
		{"SANDLOT_MAX_EXECUTIONS", "-1", func(c daemon.Config) any { return c.MaxExecutions }, int64(-1)},
		{"SANDLOT_MAX_CONTEXTS_PER_TENANT", "16", func(c daemon.Config) any { return c.MaxPerTenant }, 16},
		{"SANDLOT_MAX_CONTEXTS_PER_CONVERSATION", "17", func(c daemon.Config) any { return c.MaxPerConversation }, 17},
		{"SANDLOT_POOL_SIZE", "0", func(c daemon.Config) any { return c.PoolSize }, 0},
		{"SANDLOT_POOL_SIZES", "a=1,b=0", func(c daemon.Config) any { return c.PoolSizes }, map[string]int{"a": 1, "b": 0}},
		{"SANDLOT_CREATE_TIMEOUT", "19s", func(c daemon.Config) any { return c.CreateTimeout }, 19 * time.Second},
		{"SANDLOT_MAX_CREATING", "3", func(c daemon.Config) any { return c.MaxCreating }, 3},
		{"SANDLOT_SANDBOX_MEMORY", "300", func(c daemon.Config) any { return c.Limits.MemoryBytes }, int64(300 << 20)},
		{"SANDLOT_PROVIDERS", "e2b,local", func(c daemon.Config) any { return c.Providers }, []string{"e2b", "local"}},
		{"SANDLOT_DATA_DIR", "/srv/sandlot", func(c daemon.Config) any { return c.DataDir }, "/srv/sandlot"},
		{"SANDLOT_NODE", "fleet-3", func(c daemon.Config) any { return c.Node }, "fleet-3"},
		{"E2B_API_KEY", "e2b_key", func(c daemon.Config) any { return c.E2BProvider.APIKey }, "e2b_key"},
		{"SANDLOT_GUARD_ENTITIES", "person,address", func(c daemon.Config) any { return c.GuardEntities }, []string{"PERSON", "ADDRESS"}},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(envConfig, "")
			t.Setenv(tc.env, tc.val)
			c, err := parseServe(t)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.got(c.Config)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestServeLimitsDefaultsAreZero: unset --sandbox-* flags keep the
// provider's defaults; set ones become Config.Limits in bytes.
func TestServeLimitsDefaultsAreZero(t *testing.T) {
	var c serveConfig
	if l := c.limits(); l.MemoryBytes != 0 || l.PIDs != 0 || l.CPUs != 0 || l.DiskBytes != 0 {
		t.Fatalf("unset flags must keep the provider defaults, got %+v", l)
	}
	c = serveConfig{memoryMiB: 512, pids: 100, cpus: 1.5, diskMiB: 64}
	if l := c.limits(); l.MemoryBytes != 512<<20 || l.PIDs != 100 || l.CPUs != 1.5 || l.DiskBytes != 64<<20 {
		t.Fatalf("limits() = %+v", l)
	}
}

// TestE2BSettingsConfigurable: the e2b provider's settings are flags, and
// so environment variables and config keys, with the documented
// precedence (flag, then environment, then file); its account comes from
// E2B's own variables.
func TestE2BSettingsConfigurable(t *testing.T) {
	file := writeFile(t, "c.yaml", "e2b-template: from-file\ne2b-sizes: small:1:512,big:4:4096\ne2b-connect-timeout: 7s\ne2b-plan-compute-minutes: 600\n")
	t.Setenv("SANDLOT_E2B_DEPLOYMENT", "from-env")
	t.Setenv("SANDLOT_E2B_TEMPLATE", "from-env")
	for k, v := range map[string]string{"E2B_API_KEY": "k", "E2B_API_URL": "https://api.test", "E2B_SANDBOX_URL": "", "E2B_DOMAIN": "e2b.test"} {
		t.Setenv(k, v)
	}
	c, err := parseServe(t, "--config", file, "--e2b-template", "from-flag")
	if err != nil {
		t.Fatal(err)
	}
	want := daemon.E2BProvider{APIKey: "k", APIURL: "https://api.test", Domain: "e2b.test",
		Template: "from-flag", Deployment: "from-env", ConnectTimeout: 7 * time.Second,
		Sizes: "small:1:512,big:4:4096", PlanComputeMinutes: 600}
	if diff := cmp.Diff(want, c.E2BProvider); diff != "" {
		t.Fatalf("e2b settings (-want +got):\n%s", diff)
	}
}

// TestE2BQuotaConfigurable: the plan's limits come from the environment
// as serve's flags, and a bad one is a usage error.
func TestE2BQuotaConfigurable(t *testing.T) {
	t.Setenv("SANDLOT_E2B_PLAN_CREATIONS", "4")
	t.Setenv("SANDLOT_QUOTA_THRESHOLDS", "0.5,1")
	c, err := parseServe(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.E2BProvider.PlanCreations != 4 || c.E2BProvider.QuotaThresholds != "0.5,1" {
		t.Fatalf("plan %+v", c.E2BProvider)
	}
	t.Setenv("SANDLOT_E2B_PLAN_CREATIONS", "lots")
	if _, err := parseServe(t); err == nil {
		t.Fatal("a bad plan was accepted")
	}
}

// TestGuardModeKnob: --guard-mode is the mode of the tenant made at
// first start.
func TestGuardModeKnob(t *testing.T) {
	t.Setenv(envConfig, "")
	t.Setenv("SANDLOT_GUARD_MODE", "report")
	c, err := parseServe(t)
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	ctx := context.Background()
	if err := bootstrapTenant(ctx, st, t.TempDir(), c.guardMode, false, IO{Out: io.Discard, Err: io.Discard}); err != nil {
		t.Fatal(err)
	}
	ts, err := st.ListTenants(ctx)
	if err != nil || len(ts) != 1 {
		t.Fatalf("tenants %v, %v", ts, err)
	}
	if ts[0].GuardMode != "report" {
		t.Fatalf("first tenant's guard mode %q, want report", ts[0].GuardMode)
	}
}

// TestServeDefaults: with nothing in the environment or a file, serve's
// flags give the session specification's defaults, or leave the value to
// the manager, whose defaults contexts' TestManagerDefaults checks (0 and
// -1 below; daemon's TestConfigReachesConsumers maps them). The values are
// written out, not taken from the constants.
func TestServeDefaults(t *testing.T) {
	clearAliasEnv(t)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var probe serveConfig
	probe.registerServe(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" {
			t.Setenv(envName(f.Name), "")
		}
	})
	c, err := parseServe(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"--context-ttl", c.ContextTTL, 30 * time.Minute},
		{"--cleanup-interval", c.CleanupInterval, 60 * time.Second},
		{"--exec-timeout", c.ExecTimeout, 60 * time.Second},
		{"--max-exec-timeout", c.MaxExecTimeout, 10 * time.Minute},
		{"--max-executions", c.MaxExecutions, int64(100)},
		{"--create-timeout", c.CreateTimeout, 60 * time.Second},
		{"--max-contexts-per-tenant (the manager's 10)", c.MaxPerTenant, 0},
		{"--max-contexts-per-conversation (the manager's 5)", c.MaxPerConversation, 0},
		{"--pool-size (the manager's 2)", c.PoolSize, -1},
		{"--desktop-ttl", c.Desktop.TTL, 15 * time.Minute},
		{"--desktop-stream-wait", c.Desktop.StreamWait, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// --pool-memory-budget is in MiB; 0 leaves the manager's default and -1
// keeps the pools at their size (contexts.Config.PoolMemoryBudget).
func TestServePoolMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, 0},
		{[]string{"--pool-memory-budget", "64"}, 64 << 20},
		{[]string{"--pool-memory-budget", "-1"}, -1 << 20},
	} {
		c, err := parseServe(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if c.PoolMemoryBudget != tc.want {
			t.Errorf("%v: PoolMemoryBudget %d, want %d", tc.args, c.PoolMemoryBudget, tc.want)
		}
	}
}
