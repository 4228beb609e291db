// Package dist cross-builds sandlot's release binaries: sandlot,
// sandlot-agent and sandlot-pod-agent for each architecture, static
// (CGO_ENABLED=0: the SQLite driver is modernc.org/sqlite, pure Go), with
// -trimpath, no VCS stamping and an empty build id, and the version and
// commit linked into internal/version, so the bytes depend on the source,
// the Go toolchain and the arguments alone: two builds of one commit are
// identical (TestReproducible). Beside each binary goes its SPDX SBOM
// (NAME.spdx.json), and SHA256SUMS covers every file.
package dist

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/release/sbom"
)

// Arches are the architectures a release is built for.
var Arches = []string{"amd64", "arm64"}

// Binaries are the commands a release holds, by name.
var Binaries = map[string]string{
	"sandlot":           "./cmd/sandlot",
	"sandlot-agent":     "./cmd/sandlot-agent",
	"sandlot-pod-agent": "./cmd/sandlot-pod-agent",
}

var (
	safeVersion = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+~_-]*$`)
	safeCommit  = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
)

// versionPkg is where the version and commit are linked in.
const versionPkg = "github.com/sandlot/sandlot/internal/version"

// Config says what to build.
type Config struct {
	// Src is sandlot's module root (the directory with its go.mod).
	Src string
	// Out is where the files go; it is made when missing.
	Out string
	// Version and Commit are linked into the binaries (git describe,
	// git rev-parse HEAD).
	Version, Commit string
	// Epoch is the SBOMs' creation time (SOURCE_DATE_EPOCH, the commit's
	// time).
	Epoch time.Time
	// Arches: nil is Arches.
	Arches []string
	// Binaries: nil is Binaries (a source from before one of them was
	// added builds the ones it has).
	Binaries map[string]string
	// Go is the go command; "": go on PATH.
	Go string
	// Env is added to the builds' environment (GOCACHE, say).
	Env []string
	// Log receives one line per step; nil discards.
	Log io.Writer
}

// FileName is the name of a binary of a release: sandlot_linux_amd64.
func FileName(binary, arch string) string { return binary + "_linux_" + arch }

// Build builds every binary of cfg and writes the SBOMs and SHA256SUMS.
func Build(ctx context.Context, cfg Config) error {
	if cfg.Epoch.IsZero() {
		return fmt.Errorf("dist: no epoch (SOURCE_DATE_EPOCH)")
	}
	// Both go into -ldflags, which splits on spaces and reads quotes.
	if !safeVersion.MatchString(cfg.Version) || !safeCommit.MatchString(cfg.Commit) {
		return fmt.Errorf("dist: version %q or commit %q is not one git describe and rev-parse give", cfg.Version, cfg.Commit)
	}
	if cfg.Arches == nil {
		cfg.Arches = Arches
	}
	if cfg.Binaries == nil {
		cfg.Binaries = Binaries
	}
	if cfg.Go == "" {
		cfg.Go = "go"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(cfg.Binaries))
	ldflags := fmt.Sprintf("-s -w -buildid= -X %s.version=%s -X %s.commit=%s", versionPkg, cfg.Version, versionPkg, cfg.Commit)
	for _, arch := range cfg.Arches {
		for _, name := range names {
			out := filepath.Join(cfg.Out, FileName(name, arch))
			start := time.Now()
			cmd := exec.CommandContext(ctx, cfg.Go, "build", "-trimpath", "-buildvcs=false", "-mod=readonly",
				"-ldflags="+ldflags, "-o", out, cfg.Binaries[name])
			cmd.Dir = cfg.Src
			cmd.Env = append(buildEnv(arch), cfg.Env...)
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("dist: build %s for %s: %v\n%s", name, arch, err, b)
			}
			if _, err := sbom.Write(out, cfg.Version, cfg.Epoch); err != nil {
				return err
			}
			fmt.Fprintf(cfg.Log, "built %s (%s)\n", filepath.Base(out), time.Since(start).Round(time.Second))
		}
	}
	return WriteSums(cfg.Out)
}

// buildEnv is the environment of a build for arch: the process's, with
// every setting that changes the output fixed (a developer's GOFLAGS,
// GOAMD64 or CGO_ENABLED would otherwise make other bytes).
func buildEnv(arch string) []string {
	fixed := map[string]string{
		"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch, "GOAMD64": "v1", "GOARM64": "v8.0",
		"GOFLAGS": "", "GOWORK": "off", "GOEXPERIMENT": "", "GODEBUG": "",
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := fixed[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range fixed {
		env = append(env, k+"="+v)
	}
	return env
}

// SumsFile is the name of the checksums file.
const SumsFile = "SHA256SUMS"

// WriteSums writes SHA256SUMS in dir: a line per regular file (but
// itself), by name, in sha256sum's format, so `sha256sum -c SHA256SUMS`
// checks them.
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == SumsFile {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, bufio.NewReader(f))
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), e.Name())
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}
