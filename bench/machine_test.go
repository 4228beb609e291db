package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportNamesMachine: a report names the machine and its load beside
// the figures, in the table and in BENCHMARKS.md.
func TestReportNamesMachine(t *testing.T) {
	m := machine()
	if !strings.Contains(m, "kernel ") || !strings.Contains(m, " GiB") {
		t.Fatalf("machine() = %q, want the memory and the kernel", m)
	}
	if loadAverage() == "" {
		t.Fatal("no load average read")
	}
	rep := &Report{Host: "linux/amd64, 2 cores", Runtime: "crun", Machine: "Some CPU, 24 GiB, kernel 6.1", LoadStart: "0.50", LoadEnd: "2.25"}
	var md, tab bytes.Buffer
	rep.Markdown(&md)
	rep.Table(&tab)
	if want := "Machine: Some CPU, 24 GiB, kernel 6.1; load average (one minute) 0.50 when the run began, 2.25 when it ended."; !strings.Contains(md.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, md.String())
	}
	if want := "machine: Some CPU, 24 GiB, kernel 6.1  load 0.50 -> 2.25"; !strings.Contains(tab.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, tab.String())
	}
}
