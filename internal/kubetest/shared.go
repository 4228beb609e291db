package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/internal/testenv"
)

// LockPath is the machine-wide lock a running cluster holds: two test
// binaries (or a test and `make k8s-up`) never run clusters at once, since
// they share the node's names, cgroups, bridge and netfilter chains.
const LockPath = "/run/sandlot-kubetest.lock"

// machineLock takes LockPath, waiting at most wait for the holder.
func machineLock(ctx context.Context, wait time.Duration, logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(fmt.Sprintf("%d %s\n", os.Getpid(), os.Args[0])), 0)
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if !logged {
			holder, _ := os.ReadFile(LockPath)
			logf("another cluster runs on this machine (%s); waiting", holder)
			logged = true
		}
		if time.Now().After(deadline) {
			holder, _ := os.ReadFile(LockPath)
			f.Close()
			return nil, fmt.Errorf("kubetest: another cluster has run on this machine for %s (holder: %s); `make k8s-down` stops one from make k8s-up", wait, holder)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func unlock(f *os.File) {
	if f != nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

var shared struct {
	sync.Mutex
	c    *Cluster
	err  error
	used bool
}

// Shared returns the test binary's cluster, starting it on first use.
// A binary that calls it must run its tests through Main. Where the cluster
// cannot run (not root, binaries not built), the test skips, or fails in CI.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.used {
		shared.used = true
		shared.c, shared.err = Start(context.Background(), Options{Logf: func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "kubetest: "+f+"\n", a...)
		}})
	}
	if errors.Is(shared.err, ErrNotBuilt) {
		testenv.Require(t, false, shared.err.Error())
	}
	if shared.err != nil {
		t.Fatalf("starting the test cluster: %v", shared.err)
	}
	return shared.c
}

// Main runs the tests, then stops the shared cluster and checks that it
// left nothing on the host (a leftover fails the binary).
func Main(m *testing.M) {
	code := m.Run()
	shared.Lock()
	c := shared.c
	shared.Unlock()
	if c != nil {
		dir := c.Dir
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stopping the cluster: %v\n", err)
			code = 1
		}
		if left := Leftovers(dir); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "kubetest: the stopped cluster left: %v\n", left)
			code = 1
		}
		if changed := c.host.changed(); len(changed) > 0 {
			fmt.Fprintf(os.Stderr, "kubetest: the stopped cluster left host settings changed: %v\n", changed)
			code = 1
		}
	}
	os.Exit(code)
}

// Namespace makes a namespace named prefix-<random> that is ready for pods
// (its default service account exists) and deletes it when the test ends,
// waiting until it is gone.
func (c *Cluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Waiting frees the node for the next test: a namespace's pods
		// hold their requests until they are gone.
		if err := c.deleteNamespace(ns.Name, 3*time.Minute); err != nil {
			t.Logf("the namespace %s is not gone: %v", ns.Name, err)
		}
	})
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitFor(wctx, nil, "the default service account of "+ns.Name, func() (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(ns.Name).Get(wctx, "default", metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
