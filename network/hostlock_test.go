package network

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/nettest"
)

// TestSecondDaemonRefused: a second daemon starting networks on a host
// where one runs them (the same namespace directory) must be refused
// before it touches anything. Without the lock its Start rebuilt the
// nftables table from its own (empty) records, dropping the first
// daemon's sandbox rules, and swept the first daemon's namespaces and
// veths as orphans.
func TestSecondDaemonRefused(t *testing.T) {
	nettest.Require(t)
	ctx := context.Background()
	d := newDirs(t)
	m1 := newManager(t, d)
	n, err := m1.Setup(ctx, "sb-first", allowlistP)
	if err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, m1)

	// Another daemon: its own state directory, the host's namespaces.
	m2, err := New(Config{StateDir: t.TempDir(), NetnsDir: d.netns})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m2.Start(ctx, nil)
	if err == nil {
		m2.Close(ctx)
		t.Fatal("a second daemon started the networks of a host whose networks another one runs")
	}
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("refusal = %v, want failed_precondition naming the holder's pid", err)
	}
	after := takeSnapshot(t, m1)
	if fmt.Sprint(after) != fmt.Sprint(before) { // fmt prints maps sorted
		t.Fatalf("the refused start changed the host:\nbefore %+v\nafter  %+v", before, after)
	}
	if _, err := os.Stat(n.Path); err != nil {
		t.Fatalf("the first daemon's sandbox namespace: %v", err)
	}

	// Once the first daemon closes, the next one takes over its networks.
	if err := m1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m3, err := New(Config{StateDir: d.state, NetnsDir: d.netns})
	if err != nil {
		t.Fatal(err)
	}
	restored, err := m3.Start(ctx, nil)
	if err != nil {
		t.Fatalf("start after the first daemon closed: %v", err)
	}
	t.Cleanup(func() { m3.Purge(ctx) })
	if len(restored) != 1 || restored[0].SandboxID != "sb-first" {
		t.Fatalf("restored %+v", restored)
	}
}
