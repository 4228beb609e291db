package ports

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// TestWake: a request to a sandbox that Wake resumes waits for the
// sandbox's server, which comes up after the resume (within WakeGrace),
// and gets its answer; the same late server behind a sandbox that was
// running answers 502 at once (no grace without a resume). A paused
// sandbox without auto-resume and one that is gone answer E2B's edge
// 502 bodies, and the request never reaches the sandbox.
func TestWake(t *testing.T) {
	free := func() int {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	late := func(port int) {
		time.AfterFunc(300*time.Millisecond, func() {
			l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				t.Error(err)
				return
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		})
	}
	wakes := map[string]int{}
	h, err := New(Config{
		Lookup: func(ctx context.Context, id string) (Target, error) {
			return Target{Addr: netip.MustParseAddr("127.0.0.1"), Ingress: policy.Ingress{Public: true}}, nil
		},
		Authorize: func(ctx context.Context, id, tok string) error { return nil },
		Wake: func(ctx context.Context, id string) (bool, error) {
			wakes[id]++
			switch id {
			case "paused":
				return true, nil
			case "asleep":
				return false, fmt.Errorf("paused: %w", errdefs.ErrFailedPrecondition)
			case "gone":
				return false, fmt.Errorf("gone: %w", errdefs.ErrNotFound)
			}
			return false, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(id string, port int) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Host = Host(DefaultDomain, id, port)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		id     string
		late   bool
		status int
		body   string
	}{
		{"paused", true, 200, "up"},
		{"running", true, 502, "port"},
		{"asleep", false, 502, `"message":"The sandbox is paused"`},
		{"gone", false, 502, `"message":"The sandbox was not found"`},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			port := free()
			if tt.late {
				late(port)
			}
			status, body := get(tt.id, port)
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Fatalf("%s: %d %s, want %d %s", tt.id, status, body, tt.status, tt.body)
			}
			if wakes[tt.id] != 1 {
				t.Fatalf("%s: Wake called %d times, want 1", tt.id, wakes[tt.id])
			}
		})
	}
}

// TestWakeAsleep: a request to a context suspended to disk (its target
// Asleep: no sandbox, no address) is checked first, as any request is: a
// private port without a token, or with a wrong one, is refused and wakes
// nothing (waking costs a sandbox); an authorized one wakes it, the route
// looks the target up again and the request reaches the new sandbox; one
// that Wake does not wake answers as a paused sandbox. Before Asleep, the
// route answered "the sandbox has no network" and never called Wake.
func TestWakeAsleep(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "awake") })}
	go srv.Serve(l)
	defer srv.Close()
	port := l.Addr().(*net.TCPAddr).Port
	awake := map[string]bool{}
	wakes := map[string]int{}
	h, err := New(Config{
		Lookup: func(ctx context.Context, id string) (Target, error) {
			if !awake[id] {
				return Target{Tenant: "t1", Context: id, Asleep: true}, nil
			}
			return Target{Addr: netip.MustParseAddr("127.0.0.1"), Tenant: "t1", Context: id}, nil
		},
		Authorize: func(ctx context.Context, id, tok string) error {
			if tok != "good" {
				return errdefs.ErrPermissionDenied
			}
			return nil
		},
		Wake: func(ctx context.Context, id string) (bool, error) {
			wakes[id]++
			if id == "held" {
				return false, fmt.Errorf("paused: %w", errdefs.ErrFailedPrecondition)
			}
			if id == "stays" {
				return false, nil
			}
			awake[id] = true
			return true, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h)
	defer front.Close()
	tests := []struct {
		name, id, token string
		status          int
		body            string
		wakes           int
	}{
		{"no token", "a", "", 403, "missing traffic access token", 0},
		{"wrong token", "a", "bad", 403, "invalid traffic access token", 0},
		{"authorized", "a", "good", 200, "awake", 1},
		{"held", "held", "good", 502, `"message":"The sandbox is paused"`, 1},
		{"not woken", "stays", "good", 502, `"message":"The sandbox is paused"`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", front.URL+"/", nil)
			req.Host = Host(DefaultDomain, tt.id, port)
			if tt.token != "" {
				req.Header.Set("e2b-traffic-access-token", tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.body) {
				t.Fatalf("%d %s, want %d %s", resp.StatusCode, b, tt.status, tt.body)
			}
			if wakes[tt.id] != tt.wakes {
				t.Fatalf("Wake called %d times, want %d", wakes[tt.id], tt.wakes)
			}
		})
	}
}
