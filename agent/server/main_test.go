package server_test

import (
	"os"
	"os/exec"
	"testing"
)

// hostImports says which of the imports the tests ask of the host's python
// work, read by TestMain before any test runs: once a test starts an agent
// in this process, its reaper (agent/internal/proc) waits for every child
// of the process, and could reap an exec.Command's python before its own
// Wait, which then fails ("waitid: no child processes") and would read as
// a missing package.
var hostImports = map[string]bool{}

func TestMain(m *testing.M) {
	for _, imp := range []string{"import pandas, PIL, numpy", "import IPython", "import pandas, matplotlib"} {
		hostImports[imp] = exec.Command("/usr/bin/python3", "-c", imp).Run() == nil
	}
	os.Exit(m.Run())
}
