package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/doctor"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestDoctorRuntimeMissing runs sandlot doctor with a PATH that lacks OCI
// runtimes: the report names each missing one with how to install it, and
// the command exits 1 when serve could not run (no crun or runc under
// --runtime auto, or the named runtime missing), 0 when only a runtime
// serve does not use is missing.
func TestDoctorRuntimeMissing(t *testing.T) {
	testenv.RequireRoot(t)
	bin := testenv.SandlotBinary(t)
	// path is a PATH dir holding links to the named host tools only.
	path := func(tools ...string) string {
		dir := t.TempDir()
		for _, tool := range append(tools, "mmdebstrap") {
			p, err := exec.LookPath(tool)
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name     string
		path     string
		args     []string
		code     int
		missing  []string // named as missing, with a fix
		failures []string // checks that fail
	}{
		{"no runtime at all", path(), nil, 1, []string{"crun", "runc", "runsc"}, []string{"runtime crun", "runtime runc"}},
		{"runc asked, crun only", path("crun"), []string{"--runtime", "runc"}, 1, []string{"runc"}, []string{"runtime runc"}},
		{"auto, runc only", path("runc"), nil, 0, []string{"crun", "runsc"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			cmd := exec.Command(bin, append([]string{"doctor", "--data-dir", t.TempDir(), "--json"}, tc.args...)...)
			cmd.Env = append(os.Environ(), "PATH="+tc.path)
			cmd.Stdout, cmd.Stderr = &out, &errw
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var rep struct {
				OK     bool
				Checks []struct{ Name, Status, Detail, Fix string }
			}
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("not a JSON report: %v\n%s\n%s", err, out.String(), errw.String())
			}
			if code != tc.code || rep.OK != (tc.code == 0) {
				t.Fatalf("exit %d, ok %v; want %d\n%s%s", code, rep.OK, tc.code, out.String(), errw.String())
			}
			var failed []string
			for _, c := range rep.Checks {
				if c.Status == "fail" {
					failed = append(failed, c.Name)
				}
			}
			if strings.Join(failed, ",") != strings.Join(tc.failures, ",") {
				t.Errorf("failed checks %v, want %v\n%s", failed, tc.failures, out.String())
			}
			for _, rt := range tc.missing {
				found := false
				for _, c := range rep.Checks {
					if c.Name == "runtime "+rt && strings.Contains(c.Detail, rt+" is not in PATH") && strings.Contains(c.Fix, "install") {
						found = true
					}
				}
				if !found {
					t.Errorf("the report does not name %s as missing with a fix\n%s", rt, out.String())
				}
			}
		})
	}
	// The text report says the same to a person, with the exit status.
	var out bytes.Buffer
	cmd := exec.Command(bin, "doctor", "--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "PATH="+path())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil || !strings.Contains(out.String(), "crun is not in PATH") ||
		!strings.Contains(out.String(), "fix: apt-get install crun") || !strings.Contains(out.String(), "sandlot cannot run on this host") {
		t.Errorf("text report (err %v):\n%s", err, out.String())
	}
}

// TestDoctorFixFailurePrintsReport: a --fix whose removal fails still
// prints the report (stdout, here JSON) and the cgroups it did remove
// (stderr), and then ends with the removal's error.
func TestDoctorFixFailurePrintsReport(t *testing.T) {
	orig := removeStrayCgroups
	t.Cleanup(func() { removeStrayCgroups = orig })
	removeStrayCgroups = func(doctor.Config) ([]string, error) {
		return []string{"/sys/fs/cgroup/pids/sandlot/sb-removed0001"}, errors.New("remove /sys/fs/cgroup/pids/sandlot/sb-busy00000001: device or resource busy")
	}
	var out, errw bytes.Buffer
	dir := t.TempDir()
	err := Run(context.Background(), []string{"doctor", "--fix", "--json", "--data-dir", dir, "--state-dir", dir}, strings.NewReader(""), &out, &errw)
	if err == nil || !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "sb-busy00000001") {
		t.Errorf("err %v, want the removal's error (failed precondition)", err)
	}
	var rep struct {
		Checks []struct{ Name string }
	}
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil || len(rep.Checks) == 0 {
		t.Errorf("no report printed before the error (%v):\n%s", jerr, out.String())
	}
	if !strings.Contains(errw.String(), "sb-removed0001") {
		t.Errorf("the removed cgroup is not said on stderr:\n%s", errw.String())
	}
}

// TestDoctorMoreStateDirChecked: a --more-state-dir that is no daemon's
// state dir (missing, mistyped, empty) is a usage error before anything
// is removed, since it would protect none of that daemon's cgroups; a real
// one, given relative, is used absolute.
func TestDoctorMoreStateDirChecked(t *testing.T) {
	orig := removeStrayCgroups
	t.Cleanup(func() { removeStrayCgroups = orig })
	var got []string
	removeStrayCgroups = func(cfg doctor.Config) ([]string, error) {
		got = cfg.MoreStateDirs
		return nil, nil
	}
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.MkdirAll(filepath.Join(other, "bundles"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{filepath.Join(dir, "typo"), "", dir} {
		var out, errw bytes.Buffer
		err := Run(context.Background(), []string{"doctor", "--fix", "--json", "--data-dir", dir, "--state-dir", dir, "--more-state-dir", bad}, strings.NewReader(""), &out, &errw)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || got != nil {
			t.Errorf("--more-state-dir %q: err %v, removal ran with %v; want invalid_argument and no removal", bad, err, got)
		}
	}
	t.Chdir(dir)
	var out, errw bytes.Buffer
	Run(context.Background(), []string{"doctor", "--fix", "--json", "--data-dir", dir, "--state-dir", dir, "--more-state-dir", "other"}, strings.NewReader(""), &out, &errw)
	if len(got) != 1 || got[0] != other {
		t.Errorf("removal ran with %v, want [%s]", got, other)
	}
}
