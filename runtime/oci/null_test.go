package oci

import (
	"context"
	"syscall"
	"testing"

	"github.com/sandlot/sandlot/runtime"
)

// TestStdioNull: the runtime binary gets the sandbox's own null device as
// stdio, never the host's /dev/null: crun fchowns its stdio to the init's
// user, and with the host's /dev/null that handed the host's /dev/null to
// the sandbox's host uid (seen on this machine). Here the chown lands on
// the sandbox's node, which goes with the sandbox. (The owner of
// /dev/null itself proves nothing on a shared host: every crun user
// without this fix chowns it.)
func TestStdioNull(t *testing.T) {
	var host syscall.Stat_t
	if err := syscall.Stat("/dev/null", &host); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{KindCrun, KindRunc} {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			id, _ := startProbe(t, r, runtime.Limits{})
			ids, err := r.IDRange(id)
			if err != nil {
				t.Fatal(err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(r.nullPath(id), &st); err != nil {
				t.Fatalf("the sandbox's null device: %v", err)
			}
			if st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != host.Rdev {
				t.Errorf("null device mode %o rdev %#x, want a char device %#x", st.Mode, st.Rdev, host.Rdev)
			}
			if kind == KindCrun && !ids.Contains(st.Uid) {
				t.Errorf("the sandbox's null device is owned by %d: crun chowned some other stdio than it to the sandbox's ids (%d+)", st.Uid, ids.Base)
			}
			if err := r.Delete(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Stat(r.nullPath(id), &st); err == nil {
				t.Errorf("null device of %s left after delete", id)
			}
		})
	}
}
