package export

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyTheAssemblyExports: the exporters have one owner. Only the
// daemon's assembly (daemon, and cli for the logger) imports this package,
// and no other package imports
// the OpenTelemetry SDK, an exporter or Prometheus in non-test code:
// instrumented packages record through the telemetry API, so there is one
// metrics stack and its backend is chosen in one place.
func TestOnlyTheAssemblyExports(t *testing.T) {
	const mod = "github.com/sandlot/sandlot"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	backend := []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "github.com/prometheus/"}
	var checked int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		checked++
		for _, imp := range imports {
			if imp == mod+"/telemetry/export" && pkg != mod+"/cli" && pkg != mod+"/daemon" {
				t.Errorf("%s imports telemetry/export; only daemon and cli may", pkg)
			}
			for _, b := range backend {
				if strings.HasPrefix(imp, b) && pkg != mod+"/telemetry/export" {
					t.Errorf("%s imports %s; exporters belong to telemetry/export", pkg, imp)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("go list named %d packages; the check ran on too few", checked)
	}
}
