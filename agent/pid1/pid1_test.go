package pid1

import (
	"os"
	"testing"
)

// TestReserveThreads: after the reserve, the process has at least that many
// threads, so a full pids limit cannot stop the agent's blocking calls.
func TestReserveThreads(t *testing.T) {
	ReserveThreads(ThreadReserve)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < ThreadReserve {
		t.Fatalf("%d threads after reserving %d", len(tasks), ThreadReserve)
	}
}
