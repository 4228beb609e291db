package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"
)

const replSource = `import sys
for line in sys.stdin:
    sys.stdout.write(repr(eval(line)) + "\n")
    sys.stdout.flush()
`

// floorREPL is the floor's host python REPL: it evaluates one line per
// call over a pipe.
type floorREPL struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	rd    *bufio.Reader
}

func startFloorREPL(ctx context.Context) (*floorREPL, error) {
	cmd := exec.CommandContext(ctx, HostPython, "-u", "-c", replSource)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", HostPython, err)
	}
	return &floorREPL{cmd: cmd, stdin: stdin, rd: bufio.NewReader(stdout)}, nil
}

// call evaluates `1+1` once.
func (r *floorREPL) call(context.Context) error {
	if _, err := io.WriteString(r.stdin, "1+1\n"); err != nil {
		return err
	}
	line, err := r.rd.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "2\n" {
		return fmt.Errorf("floor REPL answered %q", line)
	}
	return nil
}

func (r *floorREPL) close() {
	r.stdin.Close()
	r.cmd.Wait()
}

// PythonPipeFloor measures the floor: a host python REPL evaluating `1+1`
// over a pipe, one line each way.
func PythonPipeFloor(ctx context.Context, n int) (Figure, error) {
	r, err := startFloorREPL(ctx)
	if err != nil {
		return Figure{}, err
	}
	defer r.close()
	samples, err := Time(ctx, 50, n, r.call)
	if err != nil {
		return Figure{}, err
	}
	f := Latency("floor: host python REPL over a pipe (1+1)", samples)
	f.Group = "floor"
	return f, nil
}

// TimePaired runs fn and the floor's call in turn n times (after warm
// warm-up rounds of each) and returns fn's samples and the floor's. The
// floor taken alone, back to back, keeps its REPL and its reader hot; its
// p50 on this VM also moves 0.02-0.12 ms between quiet runs minutes apart.
// Taken in turn with fn, both see the same machine and the same gaps.
func TimePaired(ctx context.Context, warm, n int, fn func(ctx context.Context) error) (samples, floor []time.Duration, err error) {
	r, err := startFloorREPL(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer r.close()
	for i := 0; i < warm; i++ {
		if err := r.call(ctx); err != nil {
			return nil, nil, err
		}
		if err := fn(ctx); err != nil {
			return nil, nil, err
		}
	}
	samples = make([]time.Duration, 0, n)
	floor = make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			return samples, floor, ctx.Err()
		}
		t0 := time.Now()
		if err := r.call(ctx); err != nil {
			return samples, floor, err
		}
		t1 := time.Now()
		if err := fn(ctx); err != nil {
			return samples, floor, err
		}
		floor = append(floor, t1.Sub(t0))
		samples = append(samples, time.Since(t1))
	}
	return samples, floor, nil
}
