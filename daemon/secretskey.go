package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// secretsKeyFile holds, by default, the key that encrypts tenants' secrets
// in the store (docs/network-egress.md, "Secrets at the edge").
const secretsKeyFile = "secrets-key"

// secretsKeySize is AES-256's.
const secretsKeySize = 32

// SecretsKey returns the key that seals tenants' secrets in the store,
// which the CLI opens the daemon's store with: the file named by
// --secrets-key-file, else fromEnv (the key itself, base64, which the CLI
// reads from $SANDLOT_SECRETS_KEY for deployments that pass keys through
// the environment), else DATA/secrets-key, created (32 random bytes, 0600)
// on first start. A named file must exist: a key that silently changed
// would lock every stored secret away.
func SecretsKey(dataDir, file, fromEnv string) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("secrets key: %w", err)
		}
		return parseSecretsKey(b, file)
	}
	if fromEnv != "" {
		return parseSecretsKey([]byte(fromEnv), "$SANDLOT_SECRETS_KEY")
	}
	path := filepath.Join(dataDir, secretsKeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		return parseSecretsKey(b, path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	key := make([]byte, secretsKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// O_EXCL: two daemons starting at once on one data dir keep one key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return SecretsKey(dataDir, path, "")
	}
	if err != nil {
		return nil, fmt.Errorf("write the secrets key: %w", err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the secrets key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write the secrets key: %w", err)
	}
	return key, nil
}

// parseSecretsKey accepts 32 raw bytes or their base64 (standard, padded
// or not), surrounded by white space in a text file.
func parseSecretsKey(b []byte, from string) ([]byte, error) {
	if len(b) == secretsKeySize {
		return b, nil
	}
	t := bytes.TrimSpace(b)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if k, err := enc.DecodeString(string(t)); err == nil && len(k) == secretsKeySize {
			return k, nil
		}
	}
	return nil, fmt.Errorf("secrets key in %s: want %d bytes, raw or base64 (openssl rand -base64 32)", from, secretsKeySize)
}
