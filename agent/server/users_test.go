package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// rootAgent starts an agent with --root (it needs the test to run as
// root, which CI does) whose home belongs to uid 1000, as in a sandbox.
func rootAgent(t *testing.T) (*agent.Client, *agenttest.Agent) {
	t.Helper()
	testenv.RequireRoot(t) // the agent switches users
	a := agenttest.Start(t, "--root")
	// The temp dirs above home are root's 0700: let uid 1000 through.
	for d := a.Home; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(a.Home, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return a.Dial(t), a
}

func TestUsers(t *testing.T) {
	c, a := rootAgent(t)
	ctx := context.Background()
	sh := func(user, cmd string) *agent.ExecResult {
		t.Helper()
		r, err := c.Exec(ctx, agent.ExecParams{Shell: cmd, User: user}, nil)
		if err != nil {
			t.Fatalf("exec as %q: %v", user, err)
		}
		return r
	}

	t.Run("the default user has its ids and no capability", func(t *testing.T) {
		r := sh("", `id -u; id -g; id -G; echo "$HOME $USER $PWD"; grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status | tr -d '\t'`)
		want := "1000\n1000\n1000\n" + a.Home + " user " + a.Home + "\nCapPrm:0000000000000000\nCapEff:0000000000000000\nCapAmb:0000000000000000\n"
		if r.Stdout != want || r.ExitCode != 0 {
			t.Fatalf("got %q (%s), want %q", r.Stdout, r.Stderr, want)
		}
	})
	t.Run("root is the agent's root", func(t *testing.T) {
		r := sh(agent.RootUser, `id -u; echo "$HOME $USER"`)
		if r.Stdout != "0\n/root root\n" {
			t.Fatalf("got %q %s", r.Stdout, r.Stderr)
		}
	})
	t.Run("other names are invalid", func(t *testing.T) {
		_, err := c.Exec(ctx, agent.ExecParams{Shell: "true", User: "nobody"}, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("the user cannot signal the agent", func(t *testing.T) {
		r := sh("", "kill -TERM "+strconv.Itoa(a.Cmd.Process.Pid))
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "not permitted") {
			t.Fatalf("kill the agent: exit %d %q", r.ExitCode, r.Stderr)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the user cannot become root", func(t *testing.T) {
		r := sh("", `python3 -c 'import os; os.setuid(0)' 2>&1; python3 -c 'import os; os.setgroups([0])' 2>&1`)
		if strings.Count(r.Stdout, "PermissionError") != 2 {
			t.Fatalf("got %q", r.Stdout)
		}
	})
	t.Run("files are created as their caller", func(t *testing.T) {
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "mine.txt", Data: []byte("u")}); err != nil {
			t.Fatal(err)
		}
		rootCtx := agent.WithUser(ctx, agent.RootUser)
		secret := filepath.Join(a.Home, "secret")
		if _, err := c.WriteFile(rootCtx, agent.WriteParams{Path: secret, Data: []byte("s"), Mode: 0o600}); err != nil {
			t.Fatal(err)
		}
		for path, uid := range map[string]uint32{filepath.Join(a.Home, "mine.txt"): 1000, secret: 0} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Sys().(*syscall.Stat_t).Uid; got != uid {
				t.Errorf("%s: owner %d, want %d", path, got, uid)
			}
		}
		if _, err := c.ReadFile(ctx, agent.ReadParams{Path: secret}); !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("user reads root's 0600 file: %v", err)
		}
		if r, err := c.ReadFile(rootCtx, agent.ReadParams{Path: secret}); err != nil || string(r.Data) != "s" {
			t.Errorf("root reads its file: %v", err)
		}
		if _, err := c.Mkdir(rootCtx, "/root-only"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll("/root-only") })
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: "/root-only/x", Data: []byte("x")}); !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("user writes in root's directory: %v", err)
		}
		// The agent's own credentials are back after a user's call.
		if _, err := c.WriteFile(rootCtx, agent.WriteParams{Path: "/root-only/y", Data: []byte("y")}); err != nil {
			t.Errorf("root after user: %v", err)
		}
		fi, err := c.Stat(rootCtx, "/root-only/y")
		if err != nil || fi.Owner != "root" {
			t.Errorf("stat %+v %v", fi, err)
		}
	})
	t.Run("relative paths resolve in the caller's home", func(t *testing.T) {
		r := sh(agent.RootUser, "mkdir -p /root && echo ok")
		testenv.Require(t, r.ExitCode == 0, "a /root directory on the host (the agent here runs on the host)")
		fi, err := c.Stat(agent.WithUser(ctx, agent.RootUser), ".")
		if err != nil || fi.Path != "/root" {
			t.Fatalf("stat . as root: %+v %v", fi, err)
		}
	})
	t.Run("kernels run as their user", func(t *testing.T) {
		for _, tc := range []struct{ user, want string }{{"", "1000\n"}, {agent.RootUser, "0\n"}, {agent.DefaultUser, "1000\n"}} {
			r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Bash, Code: "id -u", User: tc.user}, nil)
			if err != nil || r.Stdout != tc.want {
				t.Errorf("bash as %q: %+v %v", tc.user, r, err)
			}
		}
	})
}

// TestNoRootWithoutRoot: an agent that is not root of its sandbox (the host
// template) refuses calls as root instead of running them as the user.
func TestNoRootWithoutRoot(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	ctx := context.Background()
	if _, err := c.Exec(ctx, agent.ExecParams{Shell: "id -u", User: agent.RootUser}, nil); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("exec: %v", err)
	}
	if _, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Bash, Code: "id -u", User: agent.RootUser}, nil); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("run code: %v", err)
	}
	if _, err := c.Stat(agent.WithUser(ctx, agent.RootUser), "/"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("stat: %v", err)
	}
}

// TestSudoFiles: where the user can become root (--sudo), the user's file
// calls run as root, as E2B's envd does them, and give what they create to
// the user; what existed keeps its owner. Whatever a symlink the sandbox's
// code planted leads to, no file call reads or writes the agent itself
// (its memory, its descriptors) or anything but a regular file.
func TestSudoFiles(t *testing.T) {
	testenv.RequireRoot(t)
	a := agenttest.Start(t, "--root", "--sudo")
	for d := a.Home; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(a.Home, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	c := a.Dial(t)
	ctx := context.Background()
	owner := func(path string) uint32 {
		t.Helper()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	// A directory of root's, 0755: the user alone could not write in it.
	rootDir := filepath.Join(filepath.Dir(a.Home), "root-dir")
	if err := os.Mkdir(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(rootDir, "existing")
	if err := os.WriteFile(existing, []byte("root's"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("processes still run as the user", func(t *testing.T) {
		r, err := c.Exec(ctx, agent.ExecParams{Shell: "id -u"}, nil)
		if err != nil || r.Stdout != "1000\n" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("a write creates its parents and file for the user", func(t *testing.T) {
		path := filepath.Join(rootDir, "a", "b", "file")
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: path, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, filepath.Dir(path), filepath.Join(rootDir, "a")} {
			if got := owner(p); got != 1000 {
				t.Errorf("%s: owner %d, want 1000", p, got)
			}
		}
		if got := owner(rootDir); got != 0 {
			t.Errorf("the existing parent changed owner: %d", got)
		}
	})
	t.Run("an existing file keeps its owner", func(t *testing.T) {
		if _, err := c.WriteFile(ctx, agent.WriteParams{Path: existing, Data: []byte("user's")}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(existing); string(b) != "user's" || owner(existing) != 0 {
			t.Errorf("%q owner %d", b, owner(existing))
		}
	})
	t.Run("mkdir and move create for the user", func(t *testing.T) {
		dir := filepath.Join(rootDir, "m", "n")
		if _, err := c.Mkdir(ctx, dir); err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(rootDir, "moved", "file")
		if _, err := c.Move(ctx, agent.MoveParams{From: filepath.Join(rootDir, "a", "b", "file"), To: to}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{dir, filepath.Dir(dir), filepath.Dir(to), to} {
			if got := owner(p); got != 1000 {
				t.Errorf("%s: owner %d, want 1000", p, got)
			}
		}
	})
	t.Run("a planted symlink does not lead into the agent", func(t *testing.T) {
		for name, target := range map[string]string{
			"mem":     "/proc/self/mem",
			"environ": "/proc/self/environ",
			"fd":      "/proc/self/fd/0",
			"status":  "/proc/1/status",
			"sys":     "/sys/kernel/mm/transparent_hugepage/enabled",
		} {
			link := filepath.Join(a.Home, "link-"+name)
			r, err := c.Exec(ctx, agent.ExecParams{Shell: "ln -sf " + target + " " + link}, nil)
			if err != nil || r.ExitCode != 0 {
				t.Fatalf("ln: %+v %v", r, err)
			}
			if _, err := c.ReadFile(ctx, agent.ReadParams{Path: link}); err == nil {
				t.Errorf("read through a link to %s succeeded", target)
			}
			if _, err := c.WriteFile(ctx, agent.WriteParams{Path: link, Data: []byte("x"), Offset: 4096}); err == nil {
				t.Errorf("write through a link to %s succeeded", target)
			}
			if _, err := c.EditFile(ctx, agent.EditParams{Path: link, Old: "a", New: "b"}); err == nil {
				t.Errorf("edit through a link to %s succeeded", target)
			}
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
