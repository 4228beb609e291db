package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime/oci"
)

// TestServeLocksStateDir: a second `sandlot serve` on a state dir another
// daemon holds fails at once with a clear error (the two would destroy each
// other's sandboxes); once the first stops, the dir is free again.
func TestServeLocksStateDir(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "run")
	serve := func(ctx context.Context, name string, out *testenv.Buffer) error {
		return Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--data-dir", filepath.Join(dir, name),
			"--state-dir", state, "--pool-size", "0", "--providers", "local", "--log-level", "error", "--default-image", "none"}, strings.NewReader(""), out, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out1 testenv.Buffer
	done := make(chan error, 1)
	go func() { done <- serve(ctx, "d1", &out1) }()
	waitListening := func(out *testenv.Buffer, done chan error) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), "listening on") {
			select {
			case err := <-done:
				t.Fatalf("serve exited: %v\n%s", err, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve did not start:\n%s", out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitListening(&out1, done)
	// daemon.LockStateDir's lock file holds the holder's pid.
	if b, err := os.ReadFile(filepath.Join(state, "daemon.lock")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file %q, %v", b, err)
	}

	var out2 testenv.Buffer
	start := time.Now()
	err := serve(context.Background(), "d2", &out2)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "state dir "+state+" is in use by another sandlot daemon (pid "+strconv.Itoa(os.Getpid())+")") {
		t.Fatalf("second serve on the same state dir: %v\n%s", err, out2.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second serve took %v to fail", d)
	}
	if strings.Contains(out2.String(), "listening on") {
		t.Fatal("second serve listened")
	}

	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("first serve: %v", err)
	}
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	var out3 testenv.Buffer
	done3 := make(chan error, 1)
	go func() { done3 <- serve(ctx3, "d3", &out3) }()
	waitListening(&out3, done3)
	cancel3()
	<-done3
}

// TestMCPLocksStateDir: an MCP session must not share a state dir with a
// daemon (or another session), whose sandboxes its reconcile would destroy.
func TestMCPLocksStateDir(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "run")
	release, err := daemon.LockStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var out, errw bytes.Buffer
	err = Run(context.Background(), []string{"mcp", "--store", "memory:", "--data-dir", filepath.Join(dir, "data"), "--state-dir", state},
		strings.NewReader(""), &out, &errw)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("mcp on a locked state dir: err = %v, want failed_precondition", err)
	}
	if mcpStateDir == oci.DefaultStateDir {
		t.Fatalf("mcp's default state dir is the daemon's (%s)", mcpStateDir)
	}
}
