package oci

import (
	"errors"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// TestSameForkSpec: sandlot's own comparison, which stands in for gVisor's
// when a fork restores the source's checkpoint under
// --restore-spec-validation=warning. What names the sandbox on the host
// may differ; every other field refuses the fork (one case per field).
func TestSameForkSpec(t *testing.T) {
	build := func(id string, base uint32) *specs.Spec {
		s := runtime.Spec{ID: id, Args: []string{"/agent", "--key-fd", "3"}, Env: map[string]string{"A": "1"},
			Labels: map[string]string{"tenant": "t", "context": id}, Root: &runtime.Root{}}
		sp, err := buildSpec(s, "/roots/"+id+"/merged", KindRunsc, "", IDRange{Base: base, Size: IDRangeSize}, "/chan/"+id)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	src := build("sb-aaaaaaaaaaaa", 1<<20)
	if err := sameForkSpec(src, build("sb-bbbbbbbbbbbb", 2<<20)); err != nil {
		t.Fatalf("two sandboxes of the same template: %v", err)
	}
	allowed := map[string]func(*specs.Spec){
		"hostname":     func(s *specs.Spec) { s.Hostname = "other" },
		"mount source": func(s *specs.Spec) { s.Mounts[0].Source = "/elsewhere" },
		"label":        func(s *specs.Spec) { s.Annotations[labelPrefix+"template"] = "fork-x" },
	}
	for name, change := range allowed {
		t.Run("may differ/"+name, func(t *testing.T) {
			f := build("sb-bbbbbbbbbbbb", 2<<20)
			change(f)
			if err := sameForkSpec(src, f); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
	refused := []struct {
		name, field string
		change      func(*specs.Spec)
	}{
		{"args", "process.args", func(s *specs.Spec) { s.Process.Args = append(s.Process.Args, "--root") }},
		{"env", "process.env", func(s *specs.Spec) { s.Process.Env = append(s.Process.Env, "B=2") }},
		{"cwd", "process.cwd", func(s *specs.Spec) { s.Process.Cwd = "/" }},
		{"user", "process.user.uid", func(s *specs.Spec) { s.Process.User.UID = 0 }},
		{"capabilities", "process.capabilities", func(s *specs.Spec) { s.Process.Capabilities.Bounding = []string{"CAP_SYS_ADMIN"} }},
		{"no new privileges", "process.noNewPrivileges", func(s *specs.Spec) { s.Process.NoNewPrivileges = !s.Process.NoNewPrivileges }},
		{"rlimits", "process.rlimits", func(s *specs.Spec) { s.Process.Rlimits[0].Hard++ }},
		{"root read-only", "root.readonly", func(s *specs.Spec) { s.Root.Readonly = !s.Root.Readonly }},
		{"mount destination", "mounts[0].destination", func(s *specs.Spec) { s.Mounts[0].Destination = "/other" }},
		{"mount options", "mounts[0].options", func(s *specs.Spec) { s.Mounts[0].Options = []string{"rw"} }},
		{"mount type", "mounts[0].type", func(s *specs.Spec) { s.Mounts[0].Type = "bind" }},
		{"a mount more", "mounts", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/host", Type: "bind", Source: "/", Options: []string{"rbind"}})
		}},
		{"namespaces", "linux.namespaces", func(s *specs.Spec) { s.Linux.Namespaces = s.Linux.Namespaces[1:] }},
		{"namespace path", "linux.namespaces[5].path", func(s *specs.Spec) { s.Linux.Namespaces[5].Path = "/proc/1/ns/net" }},
		{"seccomp", "linux.seccomp", func(s *specs.Spec) { s.Linux.Seccomp = nil }},
		{"memory limit", "linux.resources.memory.limit", func(s *specs.Spec) { *s.Linux.Resources.Memory.Limit *= 2 }},
		{"cpu quota", "linux.resources.cpu.quota", func(s *specs.Spec) { *s.Linux.Resources.CPU.Quota *= 2 }},
		{"devices", "linux.resources.devices", func(s *specs.Spec) { s.Linux.Resources.Devices = s.Linux.Resources.Devices[:1] }},
		{"masked paths", "linux.maskedPaths", func(s *specs.Spec) { s.Linux.MaskedPaths = nil }},
		{"readonly paths", "linux.readonlyPaths", func(s *specs.Spec) { s.Linux.ReadonlyPaths = nil }},
		{"sysctl", "linux.sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net.ipv4.ip_forward": "1"} }},
		{"runtime annotation", "annotations", func(s *specs.Spec) { s.Annotations[annoRuntime] = KindRunc }},
		{"gvisor annotation", "annotations", func(s *specs.Spec) { s.Annotations["dev.gvisor.spec.mount.x.share"] = "shared" }},
	}
	for _, c := range refused {
		t.Run("refused/"+c.name, func(t *testing.T) {
			f := build("sb-bbbbbbbbbbbb", 2<<20)
			c.change(f)
			err := sameForkSpec(src, f)
			if !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("a fork differing in %s: %v, want failed_precondition", c.name, err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name %s", err, c.field)
			}
		})
	}
	// Numbers past 2^53 are compared exactly, not as float64s that round
	// two different limits to one.
	t.Run("refused/large numbers", func(t *testing.T) {
		s, f := build("sb-aaaaaaaaaaaa", 1<<20), build("sb-bbbbbbbbbbbb", 2<<20)
		s.Process.Rlimits[0].Hard = 1 << 63
		f.Process.Rlimits[0].Hard = 1<<63 + 1024
		if err := sameForkSpec(s, f); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("rlimits 2^63 and 2^63+1024: %v, want failed_precondition", err)
		}
	})
}

// TestRestoreAnySpecOnlyForks: gVisor's spec validation is relaxed for a
// fork's restore alone; every other runsc call (an ordinary Restore, the
// checkpoint, a create) keeps enforce, which TestRestoreIntoAnotherSandbox
// shows refusing another sandbox's checkpoint.
func TestRestoreAnySpecOnlyForks(t *testing.T) {
	r := &Runtime{stateDir: "/state"}
	has := func(d driver) bool {
		for _, a := range d.globalArgs("") {
			if a == restoreAnySpec {
				return true
			}
		}
		return false
	}
	d := driver{r: r, kind: KindRunsc}
	if has(d) {
		t.Fatalf("an ordinary runsc call has %s", restoreAnySpec)
	}
	d.anySpec = true
	if !has(d) {
		t.Fatalf("a fork's restore lacks %s", restoreAnySpec)
	}
}
