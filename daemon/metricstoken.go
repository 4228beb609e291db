package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// metricsTokenFile holds the bearer token /metrics requires: the
// exposition names tenants (quota gauges), so it is never public. A
// Prometheus scrape config reads it with authorization.credentials_file.
const metricsTokenFile = "metrics-token"

// metricsToken reads DATA/metrics-token, creating it (64 hex characters,
// 0600) on first start.
func metricsToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, metricsTokenFile)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	tok := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the metrics token: %w", err)
	}
	return tok, nil
}
