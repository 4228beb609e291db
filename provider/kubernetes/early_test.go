package kubernetes

import (
	"encoding/json"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
)

// earlyOf is the "early" field of the create's "sandbox ready" line.
func earlyOf(t *testing.T, log *testenv.Buffer) bool {
	t.Helper()
	text := log.String()
	for _, line := range strings.Split(text, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "sandbox ready" {
			return m["early"] == true
		}
	}
	t.Fatalf("no \"sandbox ready\" line in %s", text)
	return false
}

// decoy is a pool agent (the pool's key, waiting for its one enrollment)
// at an address of its own: what a stale address in a claim's status
// could name, another warm pod of the same pool.
func decoy(t *testing.T, c *cluster, poolKey []byte) (string, *agent.PodKeys) {
	t.Helper()
	keys, err := agent.NewPodKeys(nil, poolKey)
	if err != nil {
		t.Fatal(err)
	}
	wrap, err := podchannel.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ip := "127.0.0.250"
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(c.port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				keys.Accept(wrap(conn), func(agent.Enrollment) error { return nil })
			}()
		}
	}()
	return ip, keys
}

// TestEarlyEnrollment: a warm create begins the pod's enrollment at the
// address the bound claim's status names, beside the pod's read, and
// delivers it only once that read shows the address is the pod's. A
// claim whose status names another pool agent's address (a status that
// lags a replaced pod, whose address went to another warm pod) must not
// give that agent the sandbox's key: the create enrolls the bound pod at
// its own address, and the other agent stays unenrolled.
func TestEarlyEnrollment(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(map[bool]string{false: "the claim names the pod", true: "the claim names another pool agent"}[stale], func(t *testing.T) {
			ctx := testCtx(t)
			c := newCluster(t)
			var log testenv.Buffer
			p := c.provider(t, Config{Templates: map[string]Template{"python": {Pool: 1}},
				Logger: slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			c.prepare(t, p)
			var other *agent.PodKeys
			if stale {
				s, err := c.res(gvrSecret).Get(ctx, objectName("python")+"-pool", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				poolKey, err := secretData(s, secretKey)
				if err != nil {
					t.Fatal(err)
				}
				var ip string
				ip, other = decoy(t, c, poolKey)
				c.mu.Lock()
				c.claimIPs = []string{ip}
				c.mu.Unlock()
			}
			sb, err := p.Create(ctx, contexts.Spec{Template: "python", Env: map[string]string{"GREETING": "for the bound pod"}})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			defer sb.Close()
			r, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo $GREETING"}, nil)
			if err != nil || strings.TrimSpace(r.Stdout) != "for the bound pod" {
				t.Fatalf("exec: %+v, %v", r, err)
			}
			if stale {
				if other.Enrolled() {
					t.Fatal("the agent at the claim's stale address was enrolled with the sandbox's key")
				}
				if earlyOf(t, &log) {
					t.Error("the create says it used the enrollment begun at the stale address")
				}
			} else if !earlyOf(t, &log) {
				t.Error("the enrollment was not begun at the claim's address")
			}
			if err := p.Destroy(ctx, sb.ID()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
