package deb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDebianVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"v0.1.0", "0.1.0"},
		{"0.1.0", "0.1.0"},
		{"v0.1.0-3-gabc1234", "0.1.0+3.gabc1234"},
		{"v0.1.0-3-gabc1234-dirty", "0.1.0+3.gabc1234+dirty"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"abc1234", "0.0.0~git.abc1234"},
		{"abc1234-dirty", "0.0.0~git.abc1234+dirty"},
		{"", ""},
		{"v1.2", ""},
		{"devel", ""},
		{"v1.2.3;rm -rf /", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := DebianVersion(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Errorf("DebianVersion(%q) = %q, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("DebianVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestVersionsSort: dpkg itself orders the versions DebianVersion makes
// as releases follow each other, so an upgrade is an upgrade.
func TestVersionsSort(t *testing.T) {
	dpkg := requireBinary(t, "dpkg")
	for _, order := range [][]string{
		{"abc1234", "v0.1.0", "v0.1.0-3-gabc1234", "v0.1.0-3-gabc1234-dirty", "v0.1.0-10-gdef5678", "v0.1.1", "v0.2.0"},
		{"abc1234", "abc1234-dirty", "v0.1.0", "v0.1.0-dirty", "v0.1.1"},
	} {
		for i := 0; i+1 < len(order); i++ {
			a, _ := DebianVersion(order[i])
			b, _ := DebianVersion(order[i+1])
			if err := exec.Command(dpkg, "--compare-versions", a, "lt", b).Run(); err != nil {
				t.Errorf("dpkg does not sort %s (%s) before %s (%s)", a, order[i], b, order[i+1])
			}
		}
	}
}

// fakeBinaries writes three small executables to package.
func fakeBinaries(t *testing.T) (sandlot, agent, podAgent string) {
	dir := t.TempDir()
	sandlot, agent, podAgent = filepath.Join(dir, "sandlot"), filepath.Join(dir, "agent"), filepath.Join(dir, "pod-agent")
	for _, p := range []string{sandlot, agent, podAgent} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+filepath.Base(p)+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return sandlot, agent, podAgent
}

func build(t *testing.T, cfg Config) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Build(cfg, &buf); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sandlot.deb")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPackage reads the package with dpkg-deb, Debian's own tool: its
// fields, every file's path, mode and owner, the conffile and the
// maintainer scripts. Two builds of one version are the same bytes.
func TestPackage(t *testing.T) {
	dpkgDeb := requireBinary(t, "dpkg-deb")
	sandlot, agent, podAgent := fakeBinaries(t)
	doc := filepath.Join(t.TempDir(), "LICENSE")
	os.WriteFile(doc, []byte("license\n"), 0o600)
	cfg := Config{Version: "v0.1.0-3-gabc1234", Arch: "arm64", Sandlot: sandlot, Agent: agent, PodAgent: podAgent,
		Docs: map[string]string{"copyright": doc}, MTime: time.Unix(1795938546, 0)}
	p := build(t, cfg)
	field := func(name string) string {
		out, err := exec.Command(dpkgDeb, "-f", p, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	for name, want := range map[string]string{
		"Package": "sandlot", "Version": "0.1.0+3.gabc1234", "Architecture": "arm64",
		"Depends":    strings.Join(Depends, ", "),
		"Recommends": strings.Join(Recommends, ", "),
		"Suggests":   strings.Join(Suggests, ", "),
	} {
		if got := field(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if !slices.Contains(Depends, "crun | runc") {
		t.Errorf("Depends %q names no OCI runtime", Depends)
	}

	out, err := exec.Command(dpkgDeb, "--contents", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	type entry struct{ mode, owner, link string }
	got := map[string]entry{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		// drwxr-xr-x root/root 0 2026-11-29 07:49 ./etc/sandlot/ [-> target]
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		path := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
		e := entry{mode: f[0], owner: f[1]}
		if len(f) == 8 && f[6] == "->" {
			e.link = f[7]
		}
		got[path] = e
	}
	for path, want := range map[string]entry{
		Daemon:                {"-rwxr-xr-x", "root/root", ""},
		Agent:                 {"-rwxr-xr-x", "root/root", ""},
		PodAgent:              {"-rwxr-xr-x", "root/root", ""},
		Command:               {"lrwxrwxrwx", "root/root", "../lib/sandlot/sandlot"},
		Unit:                  {"-rw-r--r--", "root/root", ""},
		ConfigFile:            {"-rw-------", "root/root", ""},
		"/etc/sandlot":        {"drwxr-xr-x", "root/root", ""},
		DocDir + "/copyright": {"-rw-r--r--", "root/root", ""},
	} {
		if got[path] != want {
			t.Errorf("%s: %+v, want %+v", path, got[path], want)
		}
	}
	if _, ok := got[StateDir]; ok {
		t.Errorf("the package ships %s: dpkg would remove the state with the package; postinst makes it", StateDir)
	}

	ctrl := t.TempDir()
	if b, err := exec.Command(dpkgDeb, "--control", p, ctrl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --control: %v\n%s", err, b)
	}
	conffiles, _ := os.ReadFile(filepath.Join(ctrl, "conffiles"))
	if strings.TrimSpace(string(conffiles)) != ConfigFile {
		t.Errorf("conffiles %q, want %s", conffiles, ConfigFile)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		fi, err := os.Stat(filepath.Join(ctrl, script))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, mode %v", script, err, fi)
			continue
		}
		want, _ := embedded.ReadFile("files/" + script)
		have, _ := os.ReadFile(filepath.Join(ctrl, script))
		if !bytes.Equal(have, want) {
			t.Errorf("%s differs from files/%s", script, script)
		}
		if sh := requireBinary(t, "sh"); sh != "" {
			if b, err := exec.Command(sh, "-n", filepath.Join(ctrl, script)).CombinedOutput(); err != nil {
				t.Errorf("sh -n %s: %v\n%s", script, err, b)
			}
		}
	}

	again := build(t, cfg)
	a, _ := os.ReadFile(p)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of one version differ (%d and %d bytes)", len(a), len(b))
	}
}

// TestUnitVerifies runs systemd-analyze verify on the unit in a root that
// holds the binary it starts, so a misspelt directive or a wrong path
// fails here rather than on a host.
func TestUnitVerifies(t *testing.T) {
	analyze := requireBinary(t, "systemd-analyze")
	root := t.TempDir()
	unit, err := embedded.ReadFile("files/sandlot.service")
	if err != nil {
		t.Fatal(err)
	}
	// The units it is ordered after and wanted by are the host's.
	if err := os.CopyFS(filepath.Join(root, "usr/lib/systemd/system"), os.DirFS("/usr/lib/systemd/system")); err != nil {
		t.Fatal(err)
	}
	for path, f := range map[string]struct {
		content []byte
		mode    os.FileMode
	}{
		Unit: {unit, 0o644}, Daemon: {[]byte("#!/bin/sh\n"), 0o755},
	} {
		p := filepath.Join(root, path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, f.content, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755)
	if err := os.Symlink("../lib/sandlot/sandlot", filepath.Join(root, Command)); err != nil {
		t.Fatal(err)
	}
	verifyUnit(t, analyze, root)
}

func verifyUnit(t *testing.T, analyze, root string) {
	t.Helper()
	cmd := exec.Command(analyze, "verify", "--root="+root, "--man=no", filepath.Join(root, Unit))
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
