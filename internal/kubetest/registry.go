package kubetest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// startRegistry serves go-containerregistry's registry (in memory) on
// loopback, where the node's containerd pulls from it over plain HTTP.
func (c *Cluster) startRegistry() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	c.Registry = l.Addr().String()
	c.registry = &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = c.registry.Serve(l) }()
	return nil
}

// pushImages builds the probe binary and pushes it twice: as the node's
// pause image (pinned in containerd, so the kubelet never collects it) and
// as the probe image tests run.
func (c *Cluster) pushImages(ctx context.Context) error {
	bin, err := buildProbe(ctx, c.path("probe"))
	if err != nil {
		return err
	}
	c.probeBin = bin
	c.pauseImage = c.Registry + "/kubetest/pause:1"
	if err := PushBinaryImage(ctx, c.pauseImage, "/probe", bin, []string{"/probe", "pause"}); err != nil {
		return err
	}
	c.probeImage = c.Registry + "/kubetest/probe:1"
	return PushBinaryImage(ctx, c.probeImage, "/probe", bin, []string{"/probe", "serve"})
}

// buildProbe compiles internal/kubetest/probe as a static binary.
func buildProbe(ctx context.Context, out string) ([]byte, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./internal/kubetest/probe")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kubetest: building the probe: %v: %s", err, b)
	}
	return os.ReadFile(out)
}

// PushBinaryImage pushes to ref (on a plain-HTTP registry) an image whose
// only layer is one executable file at path, run as entrypoint.
func PushBinaryImage(ctx context.Context, ref, path string, binary []byte, entrypoint []string) error {
	img, err := BinaryImage(path, binary, entrypoint)
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("kubetest: push %s: %w", ref, err)
	}
	return nil
}

// BinaryImage is a linux/amd64 image of one executable file.
func BinaryImage(path string, binary []byte, entrypoint []string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := filepath.Dir(path)
	if dir != "/" {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir[1:] + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path[1:], Mode: 0o755, Size: int64(len(binary))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.Env = []string{"PATH=/"}
	return mutate.ConfigFile(img, cfg)
}
