package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// HostPython is the interpreter the floor and the peers use: the same one
// the sandboxes run.
const HostPython = "/usr/bin/python3"

const jupyterSource = `import json, sys, time
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
try:
    n = int(sys.argv[1])
    out = []
    for i in range(n + 5):
        t0 = time.perf_counter()
        kc.execute_interactive("1+1", store_history=False, timeout=30, output_hook=lambda m: None)
        if i >= 5:
            out.append(time.perf_counter() - t0)
    print(json.dumps(out))
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
`

// JupyterPeer measures a Jupyter kernel round trip through jupyter_client,
// the peer most notebook-style sandboxes build on.
func JupyterPeer(ctx context.Context, n int) ([]Figure, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, HostPython, "-c", jupyterSource, fmt.Sprint(n)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "ModuleNotFoundError") {
			return nil, errors.New("jupyter_client/ipykernel not installed (python3-jupyter-client, python3-ipykernel)")
		}
		return nil, fmt.Errorf("jupyter peer: %w", err)
	}
	var secs []float64
	if err := json.Unmarshal(out, &secs); err != nil {
		return nil, fmt.Errorf("jupyter peer output: %w", err)
	}
	samples := make([]time.Duration, len(secs))
	for i, s := range secs {
		samples[i] = time.Duration(s * float64(time.Second))
	}
	f := Latency("peer: Jupyter kernel round trip (jupyter_client, 1+1)", samples)
	return []Figure{f}, nil
}

// BwrapPeer measures bubblewrap spawning `true` in fresh namespaces with a
// read-only /usr: the lightest sandbox spawn on a Linux host.
func BwrapPeer(ctx context.Context, n int) ([]Figure, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("bwrap not installed (bubblewrap)")
	}
	args := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib"}
	if _, err := os.Stat("/usr/lib64"); err == nil {
		args = append(args, "--symlink", "usr/lib64", "/lib64")
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "/usr/bin/true")
	samples, err := Time(ctx, 2, n, func(ctx context.Context) error {
		return exec.CommandContext(ctx, path, args...).Run()
	})
	if err != nil {
		return nil, fmt.Errorf("bwrap: %w", err)
	}
	return []Figure{Latency("peer: bwrap spawn (true, all namespaces)", samples)}, nil
}

// E2BReference is the create time E2B publishes, quoted as a reference line.
func E2BReference() Figure {
	return Figure{Name: "reference: E2B published sandbox create time", Group: "peer", Value: 150, Unit: "ms",
		Note: "quoted from E2B's documentation, not measured here"}
}
