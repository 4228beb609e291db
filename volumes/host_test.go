package volumes

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

func newHost(t testing.TB) *Host {
	t.Helper()
	testenv.RequireRoot(t)
	h, err := NewHost(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHostOpenShares: two opens of one volume are one file system (one
// loop device), so what one writes the other reads; a removed volume's
// file is gone and opening it again says so; ids that are not a volume
// id never name a file.
func TestHostOpenShares(t *testing.T) {
	h := newHost(t)
	id := NewID()
	if err := h.Create(context.Background(), id, MinSizeBytes); err != nil {
		t.Fatal(err)
	}
	if err := h.Create(context.Background(), id, MinSizeBytes); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("create twice: %v", err)
	}
	a, err := h.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(a)
	b, err := h.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(b)
	var sa, sb unix.Stat_t
	if err := unix.Fstat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(b, &sb); err != nil {
		t.Fatal(err)
	}
	if sa.Dev != sb.Dev {
		t.Errorf("two opens are two file systems (dev %d and %d): two ext4 instances on one file", sa.Dev, sb.Dev)
	}
	if sa.Uid != UID || sa.Gid != GID {
		t.Errorf("root dir owned by %d:%d, want %d:%d", sa.Uid, sa.Gid, UID, GID)
	}
	if err := h.Remove(id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("open after remove: %v", err)
	}
	for _, bad := range []string{"../x", "vol" + "/../../etc/passwd", "", "volABC"} {
		if err := h.Create(context.Background(), bad, MinSizeBytes); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("create %q: %v", bad, err)
		}
		if _, err := h.Open(bad); err == nil {
			t.Errorf("open %q succeeded", bad)
		}
	}
}

// BenchmarkCreate is a volume's create: a sparse file and mkfs.ext4.
func BenchmarkCreate(b *testing.B) {
	h := newHost(b)
	for b.Loop() {
		id := NewID()
		if err := h.Create(context.Background(), id, DefaultSizeBytes); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		n, _ := h.Usage(id)
		b.ReportMetric(float64(n)/(1<<20), "MiB-on-disk")
		h.Remove(id)
		b.StartTimer()
	}
}

// BenchmarkOpen is what mounting a volume costs the host before the
// runtime: a loop device and the ext4 file system, first open of a
// volume no sandbox holds.
func BenchmarkOpen(b *testing.B) {
	h := newHost(b)
	id := NewID()
	if err := h.Create(context.Background(), id, DefaultSizeBytes); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		fd, err := h.Open(id)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}
