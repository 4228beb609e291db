package cli

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/tenant"
)

// Every knob of the daemon is a flag (daemonflags.go), most of them a field
// of daemon.Config. This file makes each
// one also an environment variable and a key of a config file, so the three
// cannot drift apart: a flag named context-ttl is $SANDLOT_CONTEXT_TTL and
// the key context-ttl. Precedence: a flag on the command line, then the
// environment, then the file, then the flag's default
// (docs/configuration.md). The specifications' own names of some settings
// are read too, as aliases below these (aliases.go).

// envConfig names the config file when --config is not given.
const envConfig = "SANDLOT_CONFIG"

// defaultCreateTimeout is the sandbox-creation timeout the session spec
// gives: 60 s, configurable.
const defaultCreateTimeout = 60 * time.Second

// envName is the environment variable of the flag name.
func envName(flagName string) string {
	return "SANDLOT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse parses the flags of serve or mcp and loads the rest (load).
func (c *serveConfig) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	return c.load(fs)
}

// load fills the flags the command line left unset (cobra parsed it) from
// the environment and the config file, checks the values and fills the
// daemon's Config fields no flag sets directly.
func (c *serveConfig) load(fs *flag.FlagSet) error {
	aliases, err := applyConfig(fs, c.configFile, serveKeys())
	if err != nil {
		return err
	}
	c.aliases = aliases
	if err := c.validate(); err != nil {
		return err
	}
	c.DataDir = c.store.dataDir
	c.Providers = strings.Split(c.providers, ",")
	c.Limits = c.limits()
	c.PoolMemoryBudget = c.poolBudgetMiB << 20
	if c.AuditRetention = c.auditRetention; c.auditRetention == 0 {
		c.AuditRetention = -1 // the flag's 0 keeps audit events forever
	}
	c.E2BProvider.APIKey = os.Getenv("E2B_API_KEY")
	c.E2BProvider.APIURL = os.Getenv("E2B_API_URL")
	c.E2BProvider.SandboxURL = os.Getenv("E2B_SANDBOX_URL")
	c.E2BProvider.Domain = os.Getenv("E2B_DOMAIN")
	return nil
}

// serveKeys are the names of serve's flags: a config file is shared by
// serve and mcp, so a key of serve's that mcp lacks is not an error there.
func serveKeys() map[string]bool {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	var c serveConfig
	c.registerServe(fs)
	keys := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { keys[f.Name] = true })
	return keys
}

// applyConfig sets every flag of fs not given on the command line from
// $SANDLOT_<NAME>, else from the key NAME of file ("" reads no file). A
// key that names no flag of fs nor of other (the keys of a sibling
// command sharing the file) is an error, as is a value its flag rejects.
// The flag "config" itself is read from neither. The specifications'
// names of settings are read last (applyAliases), and returned for the
// start's log.
func applyConfig(fs *flag.FlagSet, file string, other map[string]bool) ([]aliasUse, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The file's keys are flag names, which hold dashes, never dots.
	v := viper.NewWithOptions(viper.KeyDelimiter("::"))
	if file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("config file %s: %v: %w", file, err, errdefs.ErrInvalidArgument)
		}
		var unknown []string
		for k := range v.AllSettings() {
			if fs.Lookup(k) == nil && !other[k] && !isAliasKey(k) || k == "config" {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return nil, fmt.Errorf("config file %s: unknown key %s (keys are the flags' names, see docs/configuration.md): %w",
				file, strings.Join(unknown, ", "), errdefs.ErrInvalidArgument)
		}
	}
	var err error
	from := map[string]string{} // flag -> where its value came from
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] || f.Name == "config" {
			return
		}
		env := envName(f.Name)
		if berr := v.BindEnv(f.Name, env); berr != nil {
			err = berr
			return
		}
		if !v.IsSet(f.Name) {
			return
		}
		src := "config file " + file + " key " + f.Name
		if _, ok := os.LookupEnv(env); ok {
			src = "$" + env
		}
		val, verr := configString(v.Get(f.Name))
		if verr == nil {
			verr = fs.Set(f.Name, val)
		}
		if verr != nil {
			err = fmt.Errorf("%s: %v: %w", src, verr, errdefs.ErrInvalidArgument)
		}
		from[f.Name] = src
	})
	if err != nil {
		return nil, err
	}
	return applyAliases(fs, v, file, set, from)
}

// configString renders a value read from the environment or a file as
// the flag's text: a list as comma-separated items, a map (pool-sizes) as
// NAME=VALUE pairs.
func configString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			s, err := configString(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		parts := make([]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			s, err := configString(v[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, k+"="+s)
		}
		return strings.Join(parts, ","), nil
	case bool, int, int64, float64, uint64:
		return fmt.Sprint(v), nil
	case time.Duration:
		return v.String(), nil
	}
	return "", fmt.Errorf("value of type %T is not a flag value", v)
}

// validate checks the values no flag type rejects: negative or zero
// durations, unknown modes, a default above the maximum.
func (c *serveConfig) validate() error {
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"context-ttl", c.ContextTTL}, {"cleanup-interval", c.CleanupInterval},
		{"exec-timeout", c.ExecTimeout}, {"max-exec-timeout", c.MaxExecTimeout},
		{"create-timeout", c.CreateTimeout},
	}
	for _, p := range positive {
		if p.d <= 0 {
			return usageErr("--%s must be positive, got %s", p.name, p.d)
		}
	}
	for name, d := range map[string]time.Duration{"shutdown-timeout": c.ShutdownTimeout, "body-read-timeout": c.BodyReadTimeout,
		"audit-retention": c.auditRetention, "idle-suspend": c.IdleSuspend,
		"e2b-max-timeout": c.E2B.MaxTimeout, "e2b-token-ttl": c.E2B.TokenTTL,
		"e2b-paused-timeout": c.E2B.PausedTimeout} {
		if d < 0 {
			return usageErr("--%s must not be negative, got %s", name, d)
		}
	}
	if c.ExecTimeout > c.MaxExecTimeout {
		return usageErr("--exec-timeout %s is above --max-exec-timeout %s", c.ExecTimeout, c.MaxExecTimeout)
	}
	if c.LeaseTTL < 3*time.Second {
		return usageErr("--lease-ttl must be 3s or more (it is renewed every third of it), got %s", c.LeaseTTL)
	}
	if c.MaxExecutions == 0 {
		return usageErr("--max-executions must be positive, or -1 for never")
	}
	switch c.guardMode {
	case tenant.GuardOff, tenant.GuardReport, tenant.GuardEnforce:
	default:
		return usageErr("--guard-mode must be off, report or enforce, got %q", c.guardMode)
	}
	if c.MaxCreating < 0 {
		return usageErr("--max-creating must not be negative, got %d", c.MaxCreating)
	}
	ents, err := entityTypes(c.guardEntities)
	if err != nil {
		return err
	}
	c.GuardEntities = ents
	return nil
}

// entityTypes reads --guard-entities: all (nil), none (empty) or a list
// of guard.EntityTypes.
func entityTypes(v string) ([]string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "all":
		return nil, nil
	case "none":
		return []string{}, nil
	}
	out := []string{}
	for _, t := range strings.Split(v, ",") {
		t = strings.ToUpper(strings.TrimSpace(t))
		if !slices.Contains(guard.EntityTypes, t) {
			return nil, usageErr("--guard-entities: %q is not one of all, none, %s", t, strings.Join(guard.EntityTypes, ", "))
		}
		out = append(out, t)
	}
	return out, nil
}

// poolSizes is the flag value of --pool-sizes: NAME=N,...
type poolSizes map[string]int

func (p *poolSizes) Type() string { return "NAME=N,..." }

func (p *poolSizes) String() string {
	if p == nil || *p == nil {
		return ""
	}
	parts := make([]string, 0, len(*p))
	for _, k := range slices.Sorted(maps.Keys(*p)) {
		parts = append(parts, k+"="+strconv.Itoa((*p)[k]))
	}
	return strings.Join(parts, ",")
}

func (p *poolSizes) Set(s string) error {
	m := map[string]int{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, n, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return fmt.Errorf("%q is not NAME=N", part)
		}
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return fmt.Errorf("%q: the size is not a number of sandboxes", part)
		}
		m[name] = v
	}
	*p = m
	return nil
}

// templateImages is the flag value of --kube-images: NAME=REF,...
type templateImages map[string]string

func (p *templateImages) Type() string { return "NAME=REF,..." }

func (p *templateImages) String() string {
	if p == nil || *p == nil {
		return ""
	}
	parts := make([]string, 0, len(*p))
	for _, k := range slices.Sorted(maps.Keys(*p)) {
		parts = append(parts, k+"="+(*p)[k])
	}
	return strings.Join(parts, ",")
}

func (p *templateImages) Set(s string) error {
	m := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, ref, ok := strings.Cut(part, "=")
		if !ok || name == "" || ref == "" {
			return fmt.Errorf("%q is not NAME=REF", part)
		}
		m[name] = ref
	}
	*p = m
	return nil
}
