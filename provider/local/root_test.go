package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// TestRootOnImage: on an image template the agent is root of the sandbox's
// user namespace. A call as root runs as uid 0 there, which is the sandbox
// range's base on the host (no host account) and owns only the sandbox's
// writable layer; the default user stays uid 1000 without capabilities and
// cannot signal the agent (sudo: TestSudoOnImage); the host template
// refuses root.
func TestRootOnImage(t *testing.T) {
	s, _ := debiantest.Default(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			p := newImageProvider(t, kind, s, true)
			c := create(t, p, contexts.Spec{})
			ctx := context.Background()
			as := func(user, cmd string) *agent.ExecResult {
				t.Helper()
				r, err := c.Exec(ctx, agent.ExecParams{Shell: cmd, User: user, TimeoutMs: 30000}, nil)
				if err != nil {
					t.Fatalf("exec %q as %q: %v", cmd, user, err)
				}
				return r
			}
			if r := as(agent.RootUser, "id -u; touch /made-by-root; stat -c %U /made-by-root"); r.Stdout != "0\nroot\n" {
				t.Errorf("root: %q %s", r.Stdout, r.Stderr)
			}
			if r := as("", "id -u; grep -E '^CapEff' /proc/self/status | tr -d '\\t'; kill -TERM 1 2>&1 >/dev/null; echo $?"); r.Stdout != "1000\nCapEff:0000000000000000\n"+"/bin/bash: line 1: kill: (1) - Operation not permitted\n1\n" {
				t.Errorf("user: %q %s", r.Stdout, r.Stderr)
			}
			// The image has sudo, so the user's file calls run as root, as
			// on E2B, and what they create is the user's; under runsc,
			// which has no sudo, they run with the user's ids.
			if _, err := c.WriteFile(agent.WithUser(ctx, agent.RootUser), agent.WriteParams{Path: "/root/secret", Data: []byte("s"), Mode: 0o600}); err != nil {
				t.Fatal(err)
			}
			r, err := c.ReadFile(ctx, agent.ReadParams{Path: "/root/secret"})
			switch {
			case kind == "runsc" && !errors.Is(err, errdefs.ErrPermissionDenied):
				t.Errorf("user reads root's file without sudo: %v", err)
			case kind != "runsc" && (err != nil || string(r.Data) != "s"):
				t.Errorf("user reads root's file with sudo: %v", err)
			}
			if fi, err := c.WriteFile(ctx, agent.WriteParams{Path: "mine", Data: []byte("m")}); err != nil || fi.Owner != "user" {
				t.Errorf("user writes: %+v %v", fi, err)
			}
			if kind != "runsc" {
				if fi, err := c.WriteFile(ctx, agent.WriteParams{Path: "/0/made/by/user", Data: []byte("m")}); err != nil || fi.Owner != "user" {
					t.Errorf("user writes outside home: %+v %v", fi, err)
				}
			}
			// Root's file on the host: the range's base, never host root.
			rng, err := p.rt.IDRange(c.ID())
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, pid := range cgroupPIDs(t, c.ID()) {
				fi, err := os.Stat(filepath.Join("/proc", pid, "root", "made-by-root"))
				if err != nil {
					continue // runsc: the sentry's root is not the sandbox's
				}
				found = true
				if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != rng.Base {
					t.Errorf("root's file is host uid %d, want the range's base %d", uid, rng.Base)
				}
				break
			}
			if !found && kind != "runsc" {
				t.Error("root's file not found from the host")
			}
			// Root cannot reach the host: no mount, no new namespace, the
			// agent's binary and memory are out of reach.
			for _, cmd := range []string{"mount -t tmpfs none /mnt", "unshare -U true", "cat /proc/1/environ", "echo x > /opt/sandlot/sandlot-agent"} {
				if r := as(agent.RootUser, cmd+" 2>/dev/null"); r.ExitCode == 0 {
					t.Errorf("root: %q succeeded", cmd)
				}
			}
			if err := c.Ping(ctx); err != nil {
				t.Fatalf("agent after the attacks: %v", err)
			}
			hc := create(t, p, contexts.Spec{Template: HostTemplate})
			_, err = hc.Exec(ctx, agent.ExecParams{Shell: "id -u", User: agent.RootUser}, nil)
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "root is not available") {
				t.Errorf("host template, root: %v", err)
			}
		})
	}
}
