package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestHealth: the health listener answers GET /health with 200 and
// nothing else, and stops with its context.
func TestHealth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { serveHealth(ctx, addr, slog.New(slog.DiscardHandler)); close(done) }()
	get := func(method, path string) int {
		var resp *http.Response
		for range 100 { // the listener starts in the background
			req, _ := http.NewRequest(method, "http://"+addr+path, nil)
			if resp, err = http.DefaultClient.Do(req); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/health", 200},
		{"GET", "/execute", 404},
		{"POST", "/health", 405},
	} {
		t.Run(c.method+c.path, func(t *testing.T) {
			if got := get(c.method, c.path); got != c.want {
				t.Fatalf("%s %s: %d, want %d", c.method, c.path, got, c.want)
			}
		})
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the health listener outlived its context")
	}
}
