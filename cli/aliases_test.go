package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
)

// clearAliasEnv unsets every alias's variable for the test, so the
// machine's environment cannot leak in.
func clearAliasEnv(t *testing.T) {
	t.Helper()
	t.Setenv(envConfig, "")
	for _, a := range specAliases {
		t.Setenv(a.envName(), "")
	}
}

// TestSpecAliases: each configuration name of the specifications, as an
// environment variable or a config file key, sets the setting it means in
// its unit (minutes, seconds, milliseconds), and the start reports it.
func TestSpecAliases(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		file string // YAML
		got  func(daemon.Config) any
		want any
		used string // in the report
	}{
		{name: "E2B_DEFAULT_TTL_MINUTES", env: map[string]string{"E2B_DEFAULT_TTL_MINUTES": "45"},
			got: func(c daemon.Config) any { return c.ContextTTL }, want: 45 * time.Minute, used: "--context-ttl 45m"},
		{name: "E2B_SANDBOX_TIMEOUT", env: map[string]string{"E2B_SANDBOX_TIMEOUT": "480000"},
			got: func(c daemon.Config) any { return c.MaxExecTimeout }, want: 8 * time.Minute, used: "--max-exec-timeout 8m"},
		{name: "E2B_CLEANUP_INTERVAL_MINUTES", env: map[string]string{"E2B_CLEANUP_INTERVAL_MINUTES": "15"},
			got: func(c daemon.Config) any { return c.CleanupInterval }, want: 15 * time.Minute, used: "--cleanup-interval 15m"},
		{name: "E2B_TEMPLATE_ID", env: map[string]string{"E2B_TEMPLATE_ID": "my-template"},
			got: func(c daemon.Config) any { return c.E2BProvider.Template }, want: "my-template", used: "--e2b-template my-template"},
		{name: "E2B_CODE_TIMEOUT", env: map[string]string{"E2B_CODE_TIMEOUT": "300"},
			got: func(c daemon.Config) any { return c.ExecTimeout }, want: 5 * time.Minute, used: "--exec-timeout 5m"},
		{name: "E2B_SESSION_TIMEOUT_MINUTES", env: map[string]string{"E2B_SESSION_TIMEOUT_MINUTES": "10"},
			got: func(c daemon.Config) any { return c.ContextTTL }, want: 10 * time.Minute, used: "--context-ttl 10m"},
		{name: "E2B_DESKTOP_TIMEOUT", env: map[string]string{"E2B_DESKTOP_TIMEOUT": "600"},
			got: func(c daemon.Config) any { return c.Desktop.TTL }, want: 10 * time.Minute, used: "--desktop-ttl 10m"},
		{name: "E2B_DESKTOP_SESSION_TIMEOUT_MINUTES", env: map[string]string{"E2B_DESKTOP_SESSION_TIMEOUT_MINUTES": "45"},
			got: func(c daemon.Config) any { return c.Desktop.TTL }, want: 45 * time.Minute, used: "--desktop-ttl 45m"},
		{name: "E2B_DESKTOP_STREAM_READY_WAIT_MS", env: map[string]string{"E2B_DESKTOP_STREAM_READY_WAIT_MS": "2500"},
			got: func(c daemon.Config) any { return c.Desktop.StreamWait }, want: 2500 * time.Millisecond, used: "--desktop-stream-wait 2.5s"},
		{name: "E2B_DEPLOYMENT_MODE", env: map[string]string{"E2B_DEPLOYMENT_MODE": "managed"},
			got: func(c daemon.Config) any { return c.ContextTTL }, want: 30 * time.Minute, used: "accepted"},
		{name: "two names agree", env: map[string]string{"E2B_DESKTOP_TIMEOUT": "1200", "E2B_DESKTOP_SESSION_TIMEOUT_MINUTES": "20"},
			got: func(c daemon.Config) any { return c.Desktop.TTL }, want: 20 * time.Minute, used: "--desktop-ttl 20m"},
		{name: "agrees with SANDLOT name", env: map[string]string{"E2B_CODE_TIMEOUT": "90", "SANDLOT_EXEC_TIMEOUT": "1m30s"},
			got: func(c daemon.Config) any { return c.ExecTimeout }, want: 90 * time.Second, used: "--exec-timeout 1m30s"},
		{name: "file key", file: "e2b_session_timeout_minutes: 12\ndeployment_mode: managed\n",
			got: func(c daemon.Config) any { return c.ContextTTL }, want: 12 * time.Minute, used: "key e2b_session_timeout_minutes=12"},
		{name: "file key in upper case", file: "E2B_CLEANUP_INTERVAL_MINUTES: 2\n",
			got: func(c daemon.Config) any { return c.CleanupInterval }, want: 2 * time.Minute, used: "--cleanup-interval 2m"},
		{name: "environment beats the file", env: map[string]string{"E2B_TEMPLATE_ID": "from-env"}, file: "e2b_template_id: from-file\n",
			got: func(c daemon.Config) any { return c.E2BProvider.Template }, want: "from-env", used: "$E2B_TEMPLATE_ID=from-env"},
		{name: "empty is unset", env: map[string]string{"E2B_TEMPLATE_ID": ""},
			got: func(c daemon.Config) any { return c.E2BProvider.Template }, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearAliasEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var args []string
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, "c.yaml", tc.file))
			}
			c, err := parseServe(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.got(c.Config)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var report strings.Builder
			for _, u := range c.aliases {
				report.WriteString(u.from + " -> " + u.setting + "\n")
			}
			if tc.used == "" && report.Len() > 0 || !strings.Contains(report.String(), tc.used) {
				t.Errorf("report %q, want %q", report.String(), tc.used)
			}
		})
	}
}

// TestSpecAliasPrecedence: a flag on the command line beats an alias
// (reported as ignored); an alias that disagrees with the setting's own
// name, or with another alias of the setting, is a usage error naming both.
func TestSpecAliasPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		file string
		args []string
		want []string // in the error; none: accepted
	}{
		{name: "flag wins", env: map[string]string{"E2B_DEFAULT_TTL_MINUTES": "45"}, args: []string{"--context-ttl", "5m"}},
		{name: "SANDLOT name disagrees", env: map[string]string{"E2B_DEFAULT_TTL_MINUTES": "45", "SANDLOT_CONTEXT_TTL": "20m"},
			want: []string{"$E2B_DEFAULT_TTL_MINUTES=45", "$SANDLOT_CONTEXT_TTL", "--context-ttl"}},
		{name: "file key disagrees", env: map[string]string{"E2B_SANDBOX_TIMEOUT": "60000"}, file: "max-exec-timeout: 5m\n",
			want: []string{"$E2B_SANDBOX_TIMEOUT=60000", "key max-exec-timeout"}},
		{name: "file alias disagrees with env name", env: map[string]string{"SANDLOT_DESKTOP_STREAM_WAIT": "1s"}, file: "e2b_desktop_stream_ready_wait_ms: 4000\n",
			want: []string{"key e2b_desktop_stream_ready_wait_ms=4000", "$SANDLOT_DESKTOP_STREAM_WAIT"}},
		{name: "two aliases disagree", env: map[string]string{"E2B_DEFAULT_TTL_MINUTES": "30", "E2B_SESSION_TIMEOUT_MINUTES": "10"},
			want: []string{"$E2B_SESSION_TIMEOUT_MINUTES=10", "$E2B_DEFAULT_TTL_MINUTES=30"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearAliasEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, "c.yaml", tc.file))
			}
			c, err := parseServe(t, args...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.ContextTTL != 5*time.Minute || len(c.aliases) != 1 || !c.aliases[0].ignored {
					t.Fatalf("TTL %s, report %+v; want the flag's 5m and the alias reported ignored", c.ContextTTL, c.aliases)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %v is not a usage error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestSpecAliasErrors: a value that is no whole positive number of the
// alias's unit, and a deployment_mode other than managed, stop the start
// with an error naming the alias.
func TestSpecAliasErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		file string
		want string
	}{
		{name: "not a number", env: map[string]string{"E2B_CODE_TIMEOUT": "5m"}, want: "$E2B_CODE_TIMEOUT=5m: want a positive whole number of seconds"},
		{name: "zero", env: map[string]string{"E2B_DEFAULT_TTL_MINUTES": "0"}, want: "$E2B_DEFAULT_TTL_MINUTES=0"},
		{name: "negative in file", file: "e2b_desktop_stream_ready_wait_ms: -3\n", want: "key e2b_desktop_stream_ready_wait_ms=-3: want a positive whole number of milliseconds"},
		{name: "overflow", env: map[string]string{"E2B_CLEANUP_INTERVAL_MINUTES": "99999999999999"}, want: "too long"},
		{name: "deployment mode in env", env: map[string]string{"E2B_DEPLOYMENT_MODE": "self-hosted"}, want: `deployment_mode "self-hosted" is not supported: the only mode is "managed"`},
		{name: "deployment mode in file", file: "deployment_mode: byoc\n", want: "key deployment_mode=byoc"},
		{name: "unknown look-alike key", file: "e2b_session_timeout: 10\n", want: "unknown key e2b_session_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearAliasEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var args []string
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

// TestServeLogsAliases: `sandlot serve` logs at start, once each, the
// aliases it read and what they set, before anything else can fail (here
// the store's secrets key, whose file does not exist).
func TestServeLogsAliases(t *testing.T) {
	clearAliasEnv(t)
	t.Setenv("E2B_DEFAULT_TTL_MINUTES", "45")
	t.Setenv("E2B_DEPLOYMENT_MODE", "managed")
	// Bounded, should the start not fail where it is meant to.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errw bytes.Buffer
	err := Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--secrets-key-file", "/nonexistent/secrets-key",
		"--data-dir", t.TempDir(), "--state-dir", t.TempDir()}, strings.NewReader(""), &out, &errw)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/secrets-key") {
		t.Fatalf("serve's start ended with %v, want the missing secrets key", err)
	}
	log := errw.String()
	for _, want := range []string{"E2B_DEFAULT_TTL_MINUTES=45", "--context-ttl 45m", "E2B_DEPLOYMENT_MODE=managed"} {
		if n := strings.Count(log, want); n != 1 {
			t.Errorf("the start's log has %q %d times, want once:\n%s", want, n, log)
		}
	}
}

// TestSpecAliasesDocumented: docs/configuration.md names every alias's
// environment variable and file key.
func TestSpecAliasesDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range specAliases {
		for _, name := range []string{a.envName(), a.name} {
			if !strings.Contains(string(b), "`"+name+"`") {
				t.Errorf("docs/configuration.md lacks `%s`", name)
			}
		}
	}
}
