package server_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/agent/server"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestRelease: after channel.release the agent drops every connection and
// its listener, keeps its kernels, and listens again only once its socket
// directory lets it bind (the host's sealed channel under runsc).
func TestRelease(t *testing.T) {
	testenv.RequireRoot(t) // mounts the read-only directory
	a := agenttest.Start(t)
	c := a.Dial(t)
	other := a.Dial(t)
	if r := run(t, c, agent.Python, "x = 41"); !r.Success {
		t.Fatalf("x = 41: %+v", r.Error)
	}
	// A read-only file system over the socket's directory: the agent's
	// listener stays bound to the hidden inode, and a new bind is refused.
	dir := filepath.Dir(a.Socket)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_RDONLY, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	for _, cl := range []*agent.Client{c, other} {
		waitGone(t, ctx, cl)
	}
	// Nothing listens while the directory refuses the bind.
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Lstat(a.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the agent listens in a read-only directory: %v", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT, "size=64k"); err != nil {
		t.Fatal(err)
	}
	again := a.Dial(t)
	r := run(t, again, agent.Python, "x + 1")
	if got := mainText(r); got != "42" {
		t.Fatalf("x + 1 after a release = %q (%+v); the kernel should have kept x", got, r.Error)
	}
}

// waitGone waits until cl's connection is closed by the agent.
func waitGone(t *testing.T, ctx context.Context, cl *agent.Client) {
	t.Helper()
	for {
		if err := cl.Ping(ctx); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the connection still answers after a release")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestReleasePod: a pod agent refuses channel.release (its TCP listener,
// handed in, could not be opened again) and keeps serving.
func TestReleasePod(t *testing.T) {
	key := []byte("a pod's sandbox key, 32 bytes..")
	keys, err := agent.NewPodKeys(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	podTLS, err := podchannel.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		server.New(server.Config{Listener: ln, Pod: keys, PodTLS: podTLS, Home: t.TempDir()}).Serve(sctx)
	}()
	t.Cleanup(func() { stop(); ln.Close(); <-done })
	c, err := podchannel.DialPod(ctx, ln.Addr().String(), agent.ClientConfig{SandboxID: "pod", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Release(ctx); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("release of a pod agent = %v, want failed_precondition", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("the pod agent after a refused release: %v", err)
	}
}
