package daemon

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
)

// guardKeyFile holds the key of the HMACs in guard audit events, so the
// same value has the same HMAC across restarts (a finding can be matched
// to earlier ones without storing the value).
const guardKeyFile = "guard-hmac-key"

// guardKey reads DATA/guard-hmac-key, creating it (32 random bytes, 0600)
// on first start.
func guardKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, guardKeyFile)
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("guard hmac key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("write the guard hmac key: %w", err)
	}
	return b, nil
}
