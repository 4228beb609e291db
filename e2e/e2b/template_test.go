package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestTemplateBuild runs template.mjs: the official SDK's Template.build
// against `sandlot serve`, whose RUN steps run in sandboxes, then a
// sandbox of the built template. With E2E_TEMPLATE_APT=1, serve runs with
// sandbox networks on the host and the template also apt-installs jq from
// Debian's mirror through the build allowlist.
func TestTemplateBuild(t *testing.T) {
	t.Parallel()
	npmReady(t)
	testenv.RequireRoot(t)
	var extra, env []string
	if os.Getenv("E2E_TEMPLATE_APT") == "1" {
		extra, env = []string{"--network"}, []string{"APT_PACKAGE=jq"}
	}
	url, key := serveWith(t, testenv.SandlotBinary(t), extra...)
	var b [6]byte
	rand.Read(b[:])
	alias := "e2e-tpl-" + hex.EncodeToString(b[:])
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte("from the context\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "template.mjs")
	cmd.Env = append(os.Environ(), "E2B_API_KEY="+key, "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_DEBUG=",
		"ALIAS="+alias, "CONTEXT_DIR="+dir, "BASE=default")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("template.mjs: %v\n%s", err, out)
	}
}
