package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// machine names the host a report was measured on: its CPU model, memory
// and kernel, read from /proc. A figure means little without the machine
// and its load beside it (a page fault costs several times more on some
// VMs than on others). A part that cannot be read is left out.
func machine() string {
	var parts []string
	if m := procField("/proc/cpuinfo", "model name"); m != "" {
		parts = append(parts, m)
	}
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		if n, err := strconv.ParseFloat(strings.TrimSuffix(kb, " kB"), 64); err == nil {
			parts = append(parts, fmt.Sprintf("%.0f GiB", n/(1<<20)))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		parts = append(parts, "kernel "+strings.TrimSpace(string(b)))
	}
	return strings.Join(parts, ", ")
}

// loadAverage is the host's one-minute load average, or "" when it cannot
// be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// procField returns the value of the first line of a /proc file whose key
// (before its colon) is key, trimmed.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
