package e2bcompattest

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// PeakRSSGrowth runs fn and returns how far the process's peak resident
// set (VmHWM) rose above its level before fn. It resets the kernel's peak
// first (clear_refs 5), so earlier peaks do not hide fn's. Tests that bound
// memory use it against hostile input: a decompression bomb or a flood of
// output must not move the daemon's RSS by more than a generous bound.
func PeakRSSGrowth(t testing.TB, fn func()) int64 {
	t.Helper()
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset peak RSS: %v", err)
	}
	before := procStatusKB(t, "VmRSS")
	fn()
	return (procStatusKB(t, "VmHWM") - before) << 10 / raceScale
}

func procStatusKB(t testing.TB, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
