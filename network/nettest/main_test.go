package nettest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// TestMachineNetns: inside Main's child, MachineNetns is the namespace
// of the process that ran the test binary (go test), not the child's own.
func TestMachineNetns(t *testing.T) {
	Require(t)
	RequireTools(t)
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// The child's parent is Main's first process; its parent ran it.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", os.Getppid()))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	machine, err := os.Readlink("/proc/" + fields[1] + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if own == machine {
		t.Fatalf("the child runs in the machine's namespace %s", own)
	}
	out, err := exec.Command("nsenter", "--net="+MachineNetns(), "--", "readlink", "/proc/self/ns/net").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != machine {
		t.Fatalf("nsenter into MachineNetns() %q: %q, %v; want %s", MachineNetns(), got, err, machine)
	}
}
