package deb

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDependsInstallable: every package the .deb depends on (the first of
// each alternative) is one Debian's suite has and mmdebstrap installs,
// and dpkg in that root says so; a misspelt name fails the root's build.
func TestDependsInstallable(t *testing.T) {
	requireRoot(t)
	requireBinary(t, "unshare")
	root := newRoot(t, baseRoot(t))
	out := inRoot(t, root, "dpkg-query -W -f '${Package} ${Status}\\n' "+strings.Join(rootPackages(), " "))
	for _, p := range rootPackages() {
		if !strings.Contains(out, p+" install ok installed") {
			t.Errorf("%s is not installed in the root:\n%s", p, out)
		}
	}
}

// The previous package: sandlot as it stood at schema 10, the schema of
// the first version (0.1.0 in CHANGELOG.md), built from its commit with
// today's packaging, since no package was released before this one. When
// a release is tagged, previousCommit becomes that tag's commit, so the
// upgrade test always starts from the schema operators run.
const (
	previousCommit  = "9eb770d56684753dfc75b5a6620505de9ed07891"
	previousVersion = "v0.1.0"
	// currentVersion is the version the test's build of this tree gets: one
	// above previousVersion, so dpkg takes it for an upgrade.
	currentVersion = "v0.1.1"
)

// TestInstall installs the package into a fresh Debian root with dpkg,
// checks what it put where and with which modes, verifies the unit with
// the root's own systemd-analyze, starts the daemon from that root as the
// unit does and runs code through it with the key the install made; a
// second install of the same package keeps that key.
//
// Then, in another fresh root, the upgrade: the previous schema's package
// installed and used (contexts in two conversations, a template imported),
// the operator's edit of the config file, then this tree's package over
// it: the key, the edit, the contexts and the template are all there, and
// the daemon answers at the new version and schema and runs code in the
// old conversation. Remove keeps /var/lib/sandlot and the config; purge
// removes both.
func TestInstall(t *testing.T) {
	requireRoot(t)
	for _, b := range []string{"unshare", "chroot", "tar", "git", "mount"} {
		requireBinary(t, b)
	}
	images := testImages(t)
	base := baseRoot(t)
	src := moduleRoot(t)
	head, err := exec.Command("git", "-C", src, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	current := buildPackage(t, src, currentVersion, strings.TrimSpace(string(head)))

	install := func(t *testing.T, root, pkg string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "tmp", filepath.Base(pkg)), mustRead(t, pkg), 0o644); err != nil {
			t.Fatal(err)
		}
		return inRoot(t, root, "dpkg --force-confold -i /tmp/"+filepath.Base(pkg))
	}

	t.Run("fresh install", func(t *testing.T) {
		root := newRoot(t, base)
		out := install(t, root, current)
		key := readKey(t, root)
		if strings.Count(out, key) != 1 || !strings.Contains(out, "shown once") {
			t.Errorf("dpkg's output shows the key %d times, want once:\n%s", strings.Count(out, key), out)
		}
		for path, want := range map[string]struct {
			mode os.FileMode
		}{
			StateDir:                 {os.ModeDir | 0o700},
			StateDir + "/api-key":    {0o600},
			StateDir + "/sandlot.db": {0o600},
			Daemon:                   {0o755},
			Agent:                    {0o755},
			PodAgent:                 {0o755},
			Command:                  {os.ModeSymlink | 0o777},
			Unit:                     {0o644},
			ConfigFile:               {0o600},
		} {
			mode, uid := fileMode(t, filepath.Join(root, path))
			if mode != want.mode || uid != 0 {
				t.Errorf("%s: mode %v uid %d, want %v root", path, mode, uid, want.mode)
			}
		}
		if cfg, want := mustRead(t, filepath.Join(root, ConfigFile)), mustReadEmbedded(t, "files/config.yaml"); !bytes.Equal(cfg, want) {
			t.Errorf("%s is not the packaged config", ConfigFile)
		}
		if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/sandlot.service")); err != nil {
			t.Errorf("the install did not enable the unit: %v", err)
		}
		if out, err := inRootErr(root, "systemd-analyze verify --man=no "+Unit); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify in the root: %v\n%s", err, out)
		}
		if got := inRoot(t, root, "dpkg-query -W -f '${Status} ${Version}' sandlot"); got != "install ok installed 0.1.1" {
			t.Errorf("dpkg-query: %q", got)
		}

		d := startUnit(t, root, images)
		if out := d.runCode(t, key, "fresh", "x = 21\nx * 2"); !strings.Contains(out, `"text":"42"`) {
			t.Errorf("run_code: %s", out)
		}
		var v struct {
			Version       string `json:"version"`
			Commit        string `json:"commit"`
			SchemaVersion int    `json:"schemaVersion"`
		}
		json.Unmarshal(d.call(t, "", "GET", "/v1/version", "", nil, 200), &v)
		if v.Version != currentVersion || v.Commit != strings.TrimSpace(string(head)) || v.SchemaVersion <= 0 {
			t.Errorf("/v1/version %+v, want %s at %s", v, currentVersion, head)
		}
		if cli := inRoot(t, root, "sandlot version -o json"); !strings.Contains(cli, `"version": "`+currentVersion+`"`) {
			t.Errorf("sandlot version in the root: %s", cli)
		}
		d.endContexts(t, key)
		d.stop(t)

		out = install(t, root, current)
		if readKey(t, root) != key || strings.Contains(out, "shown once") {
			t.Errorf("a second install made a new key:\n%s", out)
		}
	})

	t.Run("upgrade, remove, purge", func(t *testing.T) {
		previous := buildPackage(t, previousSource(t, src), previousVersion, previousCommit)
		root := newRoot(t, base)
		install(t, root, previous)
		key := readKey(t, root)
		d := startUnit(t, root, images)
		for _, conv := range []string{"upgrade-a", "upgrade-b"} {
			if out := d.runCode(t, key, conv, "state = '"+conv+"'\nstate"); !strings.Contains(out, conv) {
				t.Fatalf("run_code in %s: %s", conv, out)
			}
		}
		d.call(t, key, "POST", "/v1/templates?name=upgrade-template", "application/x-tar", dockerArchive(t), 201)
		d.stop(t)

		cfgPath := filepath.Join(root, ConfigFile)
		edited := append(mustRead(t, cfgPath), "context-ttl: 45m # the operator's\n"...)
		if err := os.WriteFile(cfgPath, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		out := install(t, root, current)
		if strings.Contains(out, "shown once") || readKey(t, root) != key {
			t.Errorf("the upgrade made a new key:\n%s", out)
		}
		if !bytes.Equal(mustRead(t, cfgPath), edited) {
			t.Errorf("the upgrade did not keep the operator's %s", ConfigFile)
		}

		d = startUnit(t, root, images)
		var after struct {
			Version       string
			SchemaVersion int
		}
		json.Unmarshal(d.call(t, key, "GET", "/v1/version", "", nil, 200), &after)
		if after.Version != currentVersion || after.SchemaVersion < 10 {
			t.Errorf("after the upgrade /v1/version says %+v", after)
		}
		var list struct {
			Contexts []struct {
				ConversationID string `json:"conversationId"`
			} `json:"contexts"`
		}
		json.Unmarshal(d.call(t, key, "GET", "/v1/contexts", "", nil, 200), &list)
		found := map[string]bool{}
		for _, c := range list.Contexts {
			found[c.ConversationID] = true
		}
		if !found["upgrade-a"] || !found["upgrade-b"] {
			t.Errorf("after the upgrade the contexts are %+v, want upgrade-a and upgrade-b", list.Contexts)
		}
		if tpl := string(d.call(t, key, "GET", "/v1/templates/upgrade-template", "", nil, 200)); !strings.Contains(tpl, `"name":"upgrade-template"`) {
			t.Errorf("after the upgrade the template is %s", tpl)
		}
		if out := d.runCode(t, key, "upgrade-a", "print('again')"); !strings.Contains(out, "again") {
			t.Errorf("run_code in upgrade-a after the upgrade: %s", out)
		}
		d.endContexts(t, key)
		d.stop(t)

		inRoot(t, root, "dpkg --remove sandlot")
		for _, p := range []string{StateDir + "/sandlot.db", StateDir + "/api-key", ConfigFile} {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("remove took %s: %v", p, err)
			}
		}
		for _, p := range []string{Daemon, Agent, PodAgent, Unit} {
			if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
				t.Errorf("remove left %s", p)
			}
		}
		if got := inRoot(t, root, "dpkg-query -W -f '${Status}' sandlot"); got != "deinstall ok config-files" {
			t.Errorf("after remove dpkg-query says %q", got)
		}

		inRoot(t, root, "dpkg --purge sandlot")
		for _, p := range []string{StateDir, "/etc/sandlot"} {
			if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
				t.Errorf("purge left %s", p)
			}
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustReadEmbedded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := embedded.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
