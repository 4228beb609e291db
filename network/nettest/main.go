// Package nettest is the network packages' test support: it runs a test
// binary inside a network namespace of its own (which plays the host, so
// tests never touch the machine's real network), builds a fake internet
// in another namespace (a DNS server, HTTP and HTTPS servers, a private
// and a metadata address), and runs clients inside a sandbox namespace.
package nettest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

const childEnv = "SANDLOT_NETTEST_CHILD"

// Main runs the package's tests. As root it re-executes the test binary
// in a fresh network namespace (with loopback up and forwarding on) and
// exits with its status, so the tests' nftables table, veths and routes
// live and die with that namespace. Without root it runs the tests as
// they are (they skip, or fail in CI, through testenv).
func Main(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := setupHost(); err != nil {
			fmt.Fprintln(os.Stderr, "nettest:", err)
			os.Exit(2)
		}
		os.Exit(m.Run())
	}
	if os.Geteuid() != 0 {
		os.Exit(m.Run())
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nettest: re-exec in a network namespace:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// InHostNS reports whether the process runs in the namespace Main made.
func InHostNS() bool { return os.Getenv(childEnv) != "" }

// MachineNetns is the machine's own network namespace (the one Main's
// child was started from, with the machine's internet) as a path under
// /proc, for test support that needs the internet from inside the child
// (a base image's build from Debian's mirror); "" outside the child.
func MachineNetns() string {
	if !InHostNS() {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/net", os.Getppid())
}

// Require skips (or fails in CI) unless the test runs as root inside the
// namespace Main made.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv("CI") == "true" && !InHostNS() {
		t.Fatal("precondition missing in CI: root and a private network namespace (nettest.Main)")
	}
	if !InHostNS() {
		t.Skip("precondition missing: root and a private network namespace (nettest.Main)")
	}
}

func setupHost() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}
