// Command images builds sandlot's container images without a Docker
// engine (`make images`): the daemon image (image/daemonimage) and the
// pod image of the default template (image/podimage), each written as an
// OCI layout under -out and, with -registry, pushed there with the docker
// config's credentials. The Debian bases are built with mmdebstrap into
// the image store -store, once per recipe (root, minutes).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/podimage"
)

type config struct {
	store, out, sandlot, agent, podAgent, version, registry string
	podDefault                                              bool
}

func main() {
	var c config
	flag.StringVar(&c.store, "store", ".sandlot/images", "image store holding the Debian bases (make run's by default)")
	flag.StringVar(&c.out, "out", "bin/images", "where the OCI layouts go")
	flag.StringVar(&c.sandlot, "sandlot", "bin/images/sandlot", "the static sandlot binary")
	flag.StringVar(&c.agent, "agent", "bin/sandlot-agent", "the static sandlot-agent binary (the daemon image's, for local sandboxes)")
	flag.StringVar(&c.podAgent, "pod-agent", "bin/sandlot-pod-agent", "the static sandlot-pod-agent binary (the pod image's)")
	flag.StringVar(&c.version, "version", "dev", "the version: the images' tag and label")
	flag.StringVar(&c.registry, "registry", "", "HOST:PORT[/PREFIX] to push to: PREFIX/sandlot/daemon:VERSION and PREFIX/sandlot/templates/default:VERSION and :latest, where the kubernetes provider looks for a template's pod image (none: layouts only)")
	flag.BoolVar(&c.podDefault, "pod-default", true, "also build the default template's pod image")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	tag := strings.NewReplacer("+", "-", "/", "-").Replace(c.version)
	sandlot, err := os.ReadFile(c.sandlot)
	if err != nil {
		return err
	}
	agent, err := os.ReadFile(c.agent)
	if err != nil {
		return err
	}
	podAgent, err := os.ReadFile(c.podAgent)
	if err != nil {
		return err
	}
	s, err := image.Open(c.store, image.Config{})
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	progress := func(name string) func(debian.Progress) {
		last := ""
		return func(p debian.Progress) {
			if p.Phase != last {
				last = p.Phase
				fmt.Fprintf(os.Stderr, "%s: debian base [%d/%d] %s (%s)\n", name, p.Step, p.Steps, p.Phase, p.Elapsed.Round(1e9))
			}
		}
	}
	base, err := daemonimage.Base(ctx, s, progress("daemon"))
	if err != nil {
		return err
	}
	daemon, err := daemonimage.Build(ctx, base, sandlot, agent, c.version)
	if err != nil {
		return err
	}
	if err := emit(ctx, c, "daemon", daemon, "sandlot/daemon:"+tag); err != nil {
		return err
	}
	if !c.podDefault {
		return nil
	}
	def, err := debian.Ensure(ctx, s, debian.Config{}, "", progress("pod-default"))
	if err != nil {
		return err
	}
	tmpl, err := s.V1(ctx, def.Digest)
	if err != nil {
		return err
	}
	pod, err := podimage.Build(ctx, tmpl, podAgent)
	if err != nil {
		return err
	}
	return emit(ctx, c, "pod-default", pod, "sandlot/templates/default:"+tag, "sandlot/templates/default:latest")
}

// emit writes img as the layout OUT/sandlot-NAME, its index entry named
// refs[0], and pushes it as each of refs when a registry is given,
// printing what it made.
func emit(ctx context.Context, c config, name string, img v1.Image, refs ...string) error {
	d, err := img.Digest()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.out, "sandlot-"+name)
	if err := daemonimage.WriteLayout(dir, img, refs[0]); err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	fmt.Printf("%s %s %s\n", name, d, dir)
	if c.registry == "" {
		return nil
	}
	for _, ref := range refs {
		pinned, err := podimage.Push(ctx, img, strings.TrimSuffix(c.registry, "/")+"/"+ref, authn.DefaultKeychain)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s pushed as %s\n", name, pinned, ref)
	}
	return nil
}
