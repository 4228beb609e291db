package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// The specifications sandlot implements name some of its settings their
// own way (E2B_DEFAULT_TTL_MINUTES, e2b_session_timeout_minutes, ...), in
// their own units. An application configured by those names can start
// sandlot with the same environment or file: each name is read as an alias
// of the setting it means, converted from its unit. Aliases only: their
// defaults are not adopted (004's 300 s code timeout and 10-minute session
// would contradict 000's 60 s and 30 minutes, which rule).
//
// An alias is the environment variable of its name in upper case, or a key
// of the config file in lower case (or any case: file keys are read case
// blind). It sits below the command line and the setting's own name: a flag
// given on the command line wins (the alias is reported as ignored), and an
// alias that disagrees with $SANDLOT_<NAME>, with the file's key of the
// setting or with another alias of the same setting is an error naming both,
// since the operator meant one value and sandlot cannot tell which.

// specAlias is one configuration name of the specifications.
type specAlias struct {
	name string // lower case: the file key; upper case: the environment variable
	env  string // the environment variable when it is not name in upper case
	flag string // the setting it sets ("" for deployment_mode, which sets none)
	// unit of an integer value; 0: the value is the flag's text as is.
	unit time.Duration
}

// specAliases in the order they are read (and reported).
var specAliases = []specAlias{
	// 000 §8.1.
	{name: "e2b_default_ttl_minutes", flag: "context-ttl", unit: time.Minute},
	{name: "e2b_sandbox_timeout", flag: "max-exec-timeout", unit: time.Millisecond},
	{name: "e2b_cleanup_interval_minutes", flag: "cleanup-interval", unit: time.Minute},
	// 004 §4.2.
	{name: "e2b_template_id", flag: "e2b-template"},
	{name: "e2b_code_timeout", flag: "exec-timeout", unit: time.Second},
	{name: "e2b_session_timeout_minutes", flag: "context-ttl", unit: time.Minute},
	{name: "e2b_desktop_timeout", flag: "desktop-ttl", unit: time.Second},
	{name: "e2b_desktop_session_timeout_minutes", flag: "desktop-ttl", unit: time.Minute},
	{name: "e2b_desktop_stream_ready_wait_ms", flag: "desktop-stream-wait", unit: time.Millisecond},
	// 003 §4.1. A bare $DEPLOYMENT_MODE is too common a name to claim
	// (another program's "production" would stop the start), so its
	// variable carries E2B's prefix; the file key is the spec's.
	{name: "deployment_mode", env: "E2B_DEPLOYMENT_MODE"},
}

// deploymentManaged is the one deployment_mode: sandboxes on E2B's cloud
// through its API (003 §4.1). sandlot is itself the self-hosted side.
const deploymentManaged = "managed"

func (a specAlias) envName() string {
	if a.env != "" {
		return a.env
	}
	return strings.ToUpper(a.name)
}

// isAliasKey reports whether a config file key (lower case) is an alias.
func isAliasKey(k string) bool {
	for _, a := range specAliases {
		if a.name == k {
			return true
		}
	}
	return false
}

// aliasUse is an alias found at start, reported by logAliases.
type aliasUse struct {
	from    string // $NAME=VALUE, or the file key and its value
	setting string // "--context-ttl 45m", or what the alias did instead
	ignored bool   // the command line gave the setting
}

// applyAliases reads the aliases into the flags of fs: v holds the config
// file (file is its name), set the flags given on the command line, from
// where the others' values came from ($SANDLOT_<NAME> or the file's key),
// for the conflict errors. An alias of a flag fs lacks (a serve setting
// under mcp) is skipped.
func applyAliases(fs *flag.FlagSet, v *viper.Viper, file string, set map[string]bool, from map[string]string) ([]aliasUse, error) {
	var uses []aliasUse
	byAlias := map[string]string{} // flag -> the alias that set it
	for _, a := range specAliases {
		raw, src, ok := aliasValue(a, v, file)
		if !ok {
			continue
		}
		if a.flag == "" {
			if !strings.EqualFold(raw, deploymentManaged) {
				return nil, usageErr("%s: deployment_mode %q is not supported: the only mode is %q (the e2b provider's sandboxes run behind the E2B API it is given)",
					src, raw, deploymentManaged)
			}
			uses = append(uses, aliasUse{from: src, setting: "accepted (managed is the only mode)"})
			continue
		}
		f := fs.Lookup(a.flag)
		if f == nil {
			continue
		}
		val, shown, err := aliasFlagValue(a, raw)
		if err != nil {
			return nil, usageErr("%s: %v", src, err)
		}
		setting := "--" + a.flag + " " + shown
		if set[a.flag] {
			uses = append(uses, aliasUse{from: src, setting: "--" + a.flag + " given on the command line", ignored: true})
			continue
		}
		other, byName := from[a.flag], true
		if other == "" {
			other, byName = byAlias[a.flag], false
		}
		if other != "" {
			if f.Value.String() != val {
				what := "the setting's own name"
				if !byName {
					what = "another name of it"
				}
				return nil, usageErr("%s (--%s %s) conflicts with %s (%s, --%s %s): set one of them",
					src, a.flag, shown, other, what, a.flag, f.Value.String())
			}
			uses = append(uses, aliasUse{from: src, setting: setting})
			continue
		}
		if err := fs.Set(a.flag, val); err != nil {
			return nil, usageErr("%s: %v", src, err)
		}
		byAlias[a.flag] = src
		uses = append(uses, aliasUse{from: src, setting: setting})
	}
	return uses, nil
}

// aliasValue is the alias's value: its environment variable, else its
// file key. An empty value is no value (the specs' defaults of "" mean
// unset).
func aliasValue(a specAlias, v *viper.Viper, file string) (val, src string, ok bool) {
	if s, ok := os.LookupEnv(a.envName()); ok && strings.TrimSpace(s) != "" {
		s = strings.TrimSpace(s)
		return s, "$" + a.envName() + "=" + s, true
	}
	if !v.InConfig(a.name) {
		return "", "", false
	}
	s, err := configString(v.Get(a.name))
	if err != nil || strings.TrimSpace(s) == "" {
		// A value that is no text (a map) is reported as such.
		s = fmt.Sprint(v.Get(a.name))
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", "", false
	}
	return s, "config file " + file + " key " + a.name + "=" + s, true
}

// aliasFlagValue converts the alias's value to its flag's text (val, as
// the flag's String() prints it, for comparison) and to the text reported.
func aliasFlagValue(a specAlias, raw string) (val, shown string, err error) {
	if a.unit == 0 {
		return raw, raw, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n <= 0 {
		return "", "", fmt.Errorf("want a positive whole number of %s", unitName(a.unit))
	}
	if n > int64(1<<62)/int64(a.unit) {
		return "", "", fmt.Errorf("%d %s is too long", n, unitName(a.unit))
	}
	d := time.Duration(n) * a.unit
	return d.String(), shortDuration(d), nil
}

func unitName(u time.Duration) string {
	switch u {
	case time.Millisecond:
		return "milliseconds"
	case time.Second:
		return "seconds"
	}
	return "minutes"
}

// shortDuration prints d without its zero tail: 45m, not 45m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// logAliases reports, once at start, each alias read and what it set.
func logAliases(log *slog.Logger, uses []aliasUse) {
	for _, u := range uses {
		if u.ignored {
			log.Warn("a specification's setting name ignored", slog.String("name", u.from), slog.String("because", u.setting))
			continue
		}
		log.Info("a specification's setting name read", slog.String("name", u.from), slog.String("as", u.setting))
	}
}
