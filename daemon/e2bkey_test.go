package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/provider/e2b"
)

// TestE2BProviderSendsAPIKey: the e2b provider built from the daemon's
// E2BProvider settings (serve fills APIKey and APIURL from E2B_API_KEY and
// E2B_API_URL, cli's TestKnobsReachTheirConsumer) sends the key on its
// calls to the E2B API. The fake API answers 401 to any other key, as
// E2B's does; without a key the provider refuses before calling.
func TestE2BProviderSendsAPIKey(t *testing.T) {
	const key = "e2b_0123456789abcdef"
	var mu sync.Mutex
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(e2bwire.HeaderAPIKey)
		mu.Lock()
		seen = append(seen, got)
		mu.Unlock()
		if got != key {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"code":401,"message":"Invalid API key"}`))
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/v2/sandboxes" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`[]`))
	}))
	defer api.Close()
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()

	p, err := e2bProvider(log, "node-1", E2BProvider{APIKey: key, APIURL: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.List(ctx); err != nil {
		t.Fatalf("list with the key: %v", err)
	}
	mu.Lock()
	if len(seen) == 0 || seen[0] != key {
		t.Errorf("the API saw keys %q, want %q", seen, key)
	}
	mu.Unlock()

	wrong, err := e2bProvider(log, "node-1", E2BProvider{APIKey: "e2b_wrong", APIURL: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.List(ctx); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "invalid api key") {
		t.Errorf("list with a wrong key: %v, want the API's 401", err)
	}

	none, err := e2bProvider(log, "node-1", E2BProvider{APIURL: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	calls := len(seen)
	mu.Unlock()
	if _, err := none.List(ctx); !errors.Is(err, e2b.ErrNoAPIKey) {
		t.Errorf("list without a key: %v, want %v", err, e2b.ErrNoAPIKey)
	}
	mu.Lock()
	if len(seen) != calls {
		t.Errorf("the provider called the API without a key")
	}
	mu.Unlock()
}
