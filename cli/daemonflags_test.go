package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	flag "github.com/spf13/pflag"
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
