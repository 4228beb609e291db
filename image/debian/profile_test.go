package debian_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// loginProbe, run as a login shell's command, prints how many processes
// were started since the shell itself (the newest pid of the probe's pid
// namespace, where nothing else runs, against the shell's own: the
// profile's forks), then what the profile left: umask, variables,
// functions, aliases and options. Builtins only, so the probe starts no
// process itself.
const (
	bashProbe = `read -r _ _ _ _ probe_last < /proc/loadavg; echo "forks $((probe_last - $$))"; umask; declare -p; declare -f; alias -p; shopt -p; set +o`
	shProbe   = `read -r _ _ _ _ probe_last < /proc/loadavg; echo "forks $((probe_last - $$))"; umask; export -p; set +o`
)

// loginCases are the login shells compared, each as root and as the
// sandbox user: E2B's `bash -l -c` (the one that must start nothing),
// an interactive login bash (its profile reads /etc/bash.bashrc) and sh.
var loginCases = []struct{ name, shell, probe string }{
	{"bash -l", "bash -l -c", bashProbe},
	{"bash -il", "bash -i -l -c", bashProbe},
	{"sh -l", "sh -l -c", shProbe},
}

// TestLoginProfile: the default image's login profile (loginProfile)
// starts no process in `bash -l -c`, for root and for the sandbox user,
// and leaves exactly what Debian's would: the same probe is run with the
// image's files, then with Debian's own put back from their diversions
// (/etc/profile.distrib, /root/.profile.distrib), then, as the control
// that the comparison sees a difference, with Debian's profile plus one
// umask line. A profile.d script of the test's shows that profile.d is
// still sourced. Run on the full image and the core that serves first.
func TestLoginProfile(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		_, img := debiantest.Default(t)
		checkLoginProfile(t, img)
	})
	t.Run("core", func(t *testing.T) {
		_, img := debiantest.Image(t, debian.DefaultStages()[0].Config, "default-core")
		checkLoginProfile(t, img)
	})
}

func checkLoginProfile(t *testing.T, img image.Image) {
	var script strings.Builder
	script.WriteString(`set -e
dpkg-divert --list | sort | sed 's/^/divert: /'
echo 'export SANDLOT_PROFILE_D=sourced' > /etc/profile.d/zz-sandlot-test.sh
run() {
  for as in root user; do
    if [ $as = root ]; then
      env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 $3 "$4" > /tmp/out 2>&1 || echo "exit $?" >> /tmp/out
    else
      (cd /home/user && env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/home/user USER=user LOGNAME=user LANG=C.UTF-8 setpriv --reuid 1000 --regid 1000 --clear-groups $3 "$4") > /tmp/out 2>&1 || echo "exit $?" >> /tmp/out
    fi
    echo "=== $1 $as $2"
    cat /tmp/out
  done
}
`)
	for _, variant := range []string{"image", "debian", "control"} {
		switch variant {
		case "debian":
			script.WriteString("cp -p /etc/profile.distrib /etc/profile\ncp -p /root/.profile.distrib /root/.profile\n")
		case "control":
			script.WriteString("echo 'umask 027' >> /etc/profile\n")
		}
		for _, c := range loginCases {
			fmt.Fprintf(&script, "run %s '%s' '%s' '%s'\n", variant, c.name, c.shell, c.probe)
		}
	}
	out := inImageMount(t, img, true, script.String())

	for _, want := range []string{"divert: local diversion of /etc/profile to /etc/profile.distrib\n",
		"divert: local diversion of /root/.profile to /root/.profile.distrib\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("dpkg-divert --list lacks %q:\n%s", want, out)
		}
	}
	runs := parseRuns(t, out)
	for _, c := range loginCases {
		for _, as := range []string{"root", "user"} {
			key := as + " " + c.name
			img, deb, ctl := runs["image "+key], runs["debian "+key], runs["control "+key]
			if img == nil || deb == nil || ctl == nil {
				t.Fatalf("%s: a run is missing:\n%s", key, out)
			}
			t.Logf("%s: processes started by the profile: %d with the image's, %d with Debian's", key, img.forks, deb.forks)
			if diff := cmp.Diff(deb.state, img.state); diff != "" {
				t.Errorf("%s: the login state differs from Debian's profile (-debian +image):\n%s", key, diff)
			}
			if cmp.Equal(deb.state, ctl.state) {
				t.Errorf("%s: the control (Debian's profile with a umask line) compares equal: the probe sees nothing", key)
			}
			if !strings.Contains(img.state, "SANDLOT_PROFILE_D") {
				t.Errorf("%s: profile.d was not sourced:\n%s", key, img.state)
			}
			if c.name != "bash -l" {
				continue
			}
			if img.forks != 0 {
				t.Errorf("%s: the image's profile started %d process(es), want none", key, img.forks)
			}
			// Debian's forks `id -u` (and root's ~/.profile `mesg n`): the
			// probe counts them, so a fork would show.
			if deb.forks < 1 {
				t.Errorf("%s: Debian's profile counted %d processes; the probe cannot see a fork", key, deb.forks)
			}
		}
	}
}

type loginRun struct {
	forks int
	state string // the probe's output past its first line, the dynamic variables out
}

// dynamicVar matches bash's variables that differ between two runs of the
// same shell (pids, times, random numbers, the line being run).
var dynamicVar = regexp.MustCompile(`^declare -[-a-zA-Z]+ (BASHPID|BASH_ARGC|BASH_ARGV|BASH_LINENO|BASH_SOURCE|EPOCHREALTIME|EPOCHSECONDS|LINENO|PPID|RANDOM|SECONDS|SRANDOM|_|probe_last|FUNCNAME|PIPESTATUS|BASH_COMMAND|BASH_SUBSHELL)(=|$)`)

// parseRuns splits the script's output into its runs by their "=== variant
// user case" headers. A run's first line starting "forks " is the probe's
// count; what an interactive shell says before it stays in its state.
func parseRuns(t *testing.T, out string) map[string]*loginRun {
	t.Helper()
	runs := map[string]*loginRun{}
	var cur *loginRun
	var state strings.Builder
	flush := func() {
		if cur != nil {
			cur.state = state.String()
		}
		state.Reset()
	}
	for _, line := range strings.SplitAfter(out, "\n") {
		if h, ok := strings.CutPrefix(line, "=== "); ok {
			flush()
			cur = &loginRun{forks: -1}
			runs[strings.TrimSpace(h)] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if n, ok := strings.CutPrefix(line, "forks "); ok && cur.forks < 0 {
			forks, err := strconv.Atoi(strings.TrimSpace(n))
			if err != nil {
				t.Fatalf("the probe's fork count is %q:\n%s", line, out)
			}
			cur.forks = forks
			continue
		}
		if dynamicVar.MatchString(line) {
			continue
		}
		state.WriteString(line)
	}
	flush()
	for h, r := range runs {
		if r.forks < 0 {
			t.Fatalf("%s: the probe did not run:\n%s", h, out)
		}
	}
	return runs
}
