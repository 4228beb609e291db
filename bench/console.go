package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandlot/sandlot/console"
)

// Targets of the console group (issue 33), reported, never asserted.
const (
	targetConsoleKB     = 300.0
	targetConsoleLoadMs = 300.0
	targetLiveCreateMs  = 200.0
)

// consoleCases are the web console's figures: its first load's size, the
// first load over loopback, and how soon a create shows in the live list.
func consoleCases(env Env, sz Sizes) []Case {
	return []Case{
		{Name: "console: initial bundle", Group: "console", Run: func(context.Context) ([]Figure, error) {
			_, gz := console.New().Sizes()
			kb := float64(gz) / 1024
			return []Figure{WithTarget(Figure{Name: "console: first load (page, main.js, main.css), gzipped", Value: round(kb, 1), Unit: "KiB"},
				fmt.Sprintf("< %g KiB", targetConsoleKB), kb < targetConsoleKB)}, nil
		}},
		{Name: "console: first load over loopback", Group: "console", Run: func(ctx context.Context) ([]Figure, error) { return consoleLoad(ctx, env, sz) }},
		{Name: "console: create seen live", Group: "console", Run: func(ctx context.Context) ([]Figure, error) { return liveCreate(ctx, env, sz) }},
	}
}

// consoleLoad times GET /ui and the assets of its first load, each on a
// fresh connection with gzip, as a browser's first visit fetches them
// (the browser's own parse and run of main.js is measured by e2e/console).
func consoleLoad(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	if env.HTTPURL == "" {
		return nil, errors.New("no HTTP server")
	}
	get := func(ctx context.Context, path string) ([]byte, error) {
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.HTTPURL+path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return b, err
	}
	n := max(sz.Cold, 10)
	samples, err := Time(ctx, 3, n, func(ctx context.Context) error {
		if _, err := get(ctx, console.Path); err != nil {
			return err
		}
		for _, p := range []string{"/main.js", "/main.css"} {
			if _, err := get(ctx, console.Path+p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f := Latency("console: GET /ui, main.js and main.css, fresh connections, loopback", samples)
	return []Figure{WithTarget(f, fmt.Sprintf("p50 < %g ms", targetConsoleLoadMs), f.P50 < targetConsoleLoadMs)}, nil
}

// liveCreate times, with GET /v1/contexts/events open, from a run_code
// call on a new conversation being sent to the stream's first event of
// that conversation's context (state creating, written before its sandbox
// starts). The contexts are ended after each sample, untimed.
func liveCreate(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	if env.HTTPURL == "" {
		return nil, errors.New("no HTTP server")
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, env.HTTPURL+"/v1/contexts/events", nil)
	req.Header.Set("Authorization", "Bearer "+env.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/contexts/events: %s", resp.Status)
	}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	call := func(method, path string, body []byte) error {
		req, _ := http.NewRequestWithContext(ctx, method, env.HTTPURL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %s", method, path, resp.Status)
		}
		return nil
	}
	n := max(min(sz.Cold, 10), 3)
	var samples []time.Duration
	for i := 0; i < n; i++ {
		conv := fmt.Sprintf("bench-live-%d-%d", time.Now().UnixNano(), i)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			done <- call(http.MethodPost, "/v1/tools/run_code", []byte(`{"conversationId":"`+conv+`","args":{"language":"python","code":"1"}}`))
		}()
		seen := false
		timeout := time.After(time.Minute)
		for !seen {
			select {
			case line, ok := <-lines:
				if !ok {
					return nil, errors.New("the live feed ended")
				}
				if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"conversationId":"`+conv+`"`) {
					samples = append(samples, time.Since(start))
					seen = true
				}
			case <-timeout:
				return nil, fmt.Errorf("no event of %s within a minute", conv)
			}
		}
		if err := <-done; err != nil {
			return nil, err
		}
		if err := call(http.MethodDelete, "/v1/conversations/"+conv, nil); err != nil {
			return nil, err
		}
	}
	f := Latency("console: a create seen in the live list (GET /v1/contexts/events)", samples)
	return []Figure{WithTarget(f, fmt.Sprintf("p50 < %g ms", targetLiveCreateMs), f.P50 < targetLiveCreateMs)}, nil
}
