package nettest

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/netns"
)

// MachineRelay listens on a loopback port of the namespace Main made and
// relays each connection to address (an IP literal with a port) in the
// machine's own namespace, for tests that need a service of the machine
// (Postgres) from inside Main's child. It returns the local address; the
// listener and every relayed connection end with t.
func MachineRelay(t testing.TB, address string) string {
	t.Helper()
	Require(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dial := netns.Dialer(MachineNetns())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := dial(context.Background(), "tcp4", address)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(up)
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	return l.Addr().String()
}

// PostgresURL is SANDLOT_TEST_POSTGRES (which names a server of the
// machine) reached through a MachineRelay, for store tests from inside
// Main's child. Without the variable t is skipped, or fails in CI.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := testenv.Env(t, "SANDLOT_TEST_POSTGRES")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("SANDLOT_TEST_POSTGRES: %v", err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	host := u.Hostname()
	if net.ParseIP(host) == nil {
		addrs, err := net.LookupHost(host) // localhost, from /etc/hosts
		if err != nil || len(addrs) == 0 {
			t.Fatalf("SANDLOT_TEST_POSTGRES: host %q: %v", host, err)
		}
		host = addrs[0]
	}
	u.Host = MachineRelay(t, net.JoinHostPort(host, port))
	return u.String()
}
