package doctor

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// runtimes are the OCI runtimes sandlot drives; auto takes the first of
// autoRuntimes found (runtime/oci).
var (
	runtimes     = []string{"crun", "runc", "runsc"}
	autoRuntimes = map[string]bool{"crun": true, "runc": true}
)

// runtimeFix says how to install each runtime.
var runtimeFix = map[string]string{
	"crun":  "apt-get install crun",
	"runc":  "apt-get install runc",
	"runsc": "install gVisor's runsc (CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@latest, or gVisor's apt repository)",
}

// checkRuntimes gives one result per runtime. A missing runtime is a
// warning unless serve needs it: the one --runtime names, or under auto
// crun and runc when neither is there.
func checkRuntimes(ctx context.Context, cfg Config) []Result {
	var out []Result
	usable := 0
	for _, name := range runtimes {
		r := Result{Name: "runtime " + name, Required: cfg.Runtime == name}
		bin, ok := cfg.lookPath(name)
		if !ok {
			r.Status, r.Detail, r.Fix = Warn, name+" is not in PATH", runtimeFix[name]
			if r.Required {
				r.Status, r.Detail = Fail, name+" is not in PATH, and --runtime "+name+" needs it"
			}
			out = append(out, r)
			continue
		}
		v, err := cfg.Probes.Version(ctx, bin)
		if err != nil {
			r.Status, r.Detail, r.Fix = Warn, bin+" --version failed: "+err.Error(), "reinstall "+name+" ("+runtimeFix[name]+")"
			if r.Required {
				r.Status = Fail
			}
			out = append(out, r)
			continue
		}
		if autoRuntimes[name] {
			usable++
		}
		r.Status, r.Detail = OK, bin+": "+v
		out = append(out, r)
	}
	if cfg.Runtime == "auto" && usable == 0 {
		for i := range out {
			if autoRuntimes[strings.TrimPrefix(out[i].Name, "runtime ")] {
				out[i].Status, out[i].Required = Fail, true
				out[i].Detail += "; --runtime auto needs crun or runc"
			}
		}
	}
	return out
}

// probeVersion runs bin --version and returns its first line.
func probeVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	line, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	return line, nil
}
