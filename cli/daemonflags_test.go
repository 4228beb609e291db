package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/provider/e2b"
)

// TestDaemonFlagsShared: serve and mcp take every daemon flag, from the
// one registerDaemon, and only serve takes the HTTP front door's.
func TestDaemonFlagsShared(t *testing.T) {
	var daemon, http []string
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var c serveConfig
	c.registerDaemon(fs, daemonDefaults{})
	fs.VisitAll(func(f *flag.Flag) { daemon = append(daemon, f.Name) })
	hs := flag.NewFlagSet("y", flag.ContinueOnError)
	c.registerHTTP(hs)
	hs.VisitAll(func(f *flag.Flag) { http = append(http, f.Name) })
	if len(daemon) < 10 || len(http) < 5 {
		t.Fatalf("daemon flags %v, http flags %v", daemon, http)
	}
	usage := func(cmd string) string {
		var out, errw bytes.Buffer
		err := Run(context.Background(), []string{cmd, "-h"}, strings.NewReader(""), &out, &errw)
		if err != nil {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		return out.String() + errw.String()
	}
	for _, c := range []struct {
		cmd      string
		wantHTTP bool
	}{{"serve", true}, {"mcp", false}} {
		t.Run(c.cmd, func(t *testing.T) {
			text := usage(c.cmd)
			for _, name := range daemon {
				if !strings.Contains(text, "-"+name+" ") && !strings.Contains(text, "-"+name+"\n") {
					t.Errorf("%s lacks -%s:\n%s", c.cmd, name, text)
				}
			}
			for _, name := range http {
				if got := strings.Contains(text, "-"+name+" "); got != c.wantHTTP {
					t.Errorf("%s has -%s: %v, want %v", c.cmd, name, got, c.wantHTTP)
				}
			}
		})
	}
}

// TestE2BHelpStatesTheCodeDefaults: the help of --e2b-connect-timeout and
// --e2b-template, and their rows in docs/configuration.md, name the
// defaults the e2b provider uses (provider/e2b), not others.
func TestE2BHelpStatesTheCodeDefaults(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var c serveConfig
	c.registerServe(fs)
	for _, tc := range []struct{ flag, want string }{
		{"e2b-connect-timeout", "(0: the provider default, " + e2b.DefaultConnectTimeout.String() + ")"},
		{"e2b-template", "(default: " + e2b.DefaultTemplate + ","},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			usage := fs.Lookup(tc.flag).Usage
			if !strings.Contains(usage, tc.want) {
				t.Errorf("--%s's help %q does not say %q", tc.flag, usage, tc.want)
			}
			var row string
			for line := range strings.SplitSeq(string(b), "\n") {
				if strings.HasPrefix(line, "| `--"+tc.flag+"` |") {
					row = line
				}
			}
			if !strings.HasSuffix(row, "| "+usage+" |") {
				t.Errorf("docs/configuration.md's row of --%s is %q, want its help %q", tc.flag, row, usage)
			}
		})
	}
}
