package pid1

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// threads is how many threads this process has.
func threads(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// TestReserveThreads: after the reserve, the process has at least that many
// threads, so a full pids limit cannot stop the agent's blocking calls. It
// runs in a fresh process of this test binary, which has fewer threads
// before the reserve (checked), so the reserve is what made them.
func TestReserveThreads(t *testing.T) {
	if os.Getenv("SANDLOT_T_PID1_RESERVE") == "1" {
		before := threads(t)
		ReserveThreads(ThreadReserve)
		t.Logf("threads %d %d", before, threads(t))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReserveThreads$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "SANDLOT_T_PID1_RESERVE=1", "GOMAXPROCS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the reserve's process: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "threads ")
	f := strings.Fields(rest)
	if !ok || len(f) < 2 {
		t.Fatalf("no thread counts in:\n%s", out)
	}
	before, _ := strconv.Atoi(f[0])
	after, _ := strconv.Atoi(f[1])
	if before >= ThreadReserve || after < ThreadReserve {
		t.Fatalf("%d threads before the reserve and %d after, want fewer than %d and then at least as many", before, after, ThreadReserve)
	}
}
