package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/templates"
)

const templatePushLong = `Pushes the pod image of a template to a registry: the template's image
plus the static sandlot-pod-agent at /usr/local/bin/sandlot-agent as its
entrypoint (sandlot-agent pod), user 1000 where the image names none
(image/podimage). It is what a Kubernetes pod of the template runs
(docs/kubernetes.md, "Images"). The image is reproducible: the same
template and agent give the same digest, so pushing an unchanged template
uploads nothing.

REF is written out in full, REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST);
nothing is filled in, so "sandlot/py:1" (which docker would send to Docker
Hub) is refused. Registries on loopback or a private address are spoken to
over plain HTTP, others over HTTPS. Credentials come from the docker config
($DOCKER_CONFIG/config.json, else ~/.docker/config.json, with its
credential helpers), as docker login leaves them. The pushed image's
pinned reference (REPOSITORY@sha256:...) is printed: name that in a pod,
a tag may move.

Like template build, it works on the store and the image store directly,
as the operator (--data-dir or --store, --images-dir; --tenant for a
tenant's template, else a built-in or public one). No daemon API hands
out a template's image, so there is no --url.`

func newTemplatePushCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "push TEMPLATE REF",
		Short: "push a template's pod image (its image plus sandlot-pod-agent as entrypoint) to a registry",
		Long:  templatePushLong,
		Args:  cobra.ExactArgs(2),
		Example: `  sandlot template push default registry.example:5000/sandlot/default:1
  sandlot template push data-tools 10.0.0.5:5000/acme/data-tools:v2 --tenant acme -o json`,
	}
	fs := cmd.Flags()
	var o templatePushFlags
	o.store.register(fs)
	fs.StringVar(&o.imagesDir, "images-dir", "", "image store (default DATA_DIR/images, serve's)")
	fs.StringVar(&o.tenantID, "tenant", "", "the tenant whose template TEMPLATE names (default: a built-in or public template)")
	fs.StringVar(&o.agent, "agent", "", "the static sandlot-pod-agent to put in the image (default: sandlot-pod-agent beside this binary, else $"+podAgentEnv+")")
	// --url is taken only to say why it cannot be: a user of template
	// build's remote mode tries it here too.
	fs.String("url", "", "not taken: template push works on the image store, as the operator")
	_ = fs.MarkHidden("url")
	var out output
	out.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if fs.Changed("url") {
			return usageErr("template push: no daemon API hands out a template's image, so it works on the image store itself, as the operator: run it where the store is (--data-dir or --store, --images-dir), without --url")
		}
		return templatePush(cmd.Context(), ioOf(cmd), args[0], args[1], o, out)
	}
	return cmd
}

// templatePushFlags are the flags of template push.
type templatePushFlags struct {
	imagesDir, tenantID, agent string
	store                      storeFlags
}

// pushed is what template push prints with -o json|yaml.
type pushed struct {
	Template string `json:"template" yaml:"template"`
	ID       string `json:"id" yaml:"id"`
	Ref      string `json:"ref" yaml:"ref"`       // as given
	Pinned   string `json:"pinned" yaml:"pinned"` // REPOSITORY@sha256:...
	Digest   string `json:"digest" yaml:"digest"`
}

func templatePush(ctx context.Context, std IO, tmpl, ref string, o templatePushFlags, out output) error {
	// The reference is checked before anything is opened: a typo fails
	// at once.
	if _, err := podimage.ParseRef(ref); err != nil {
		return err
	}
	agentPath, err := agentBinary(o.agent)
	if err != nil {
		return err
	}
	agent, err := os.ReadFile(agentPath)
	if err != nil {
		return usageErr("template push: the agent binary: %v", err)
	}
	if o.imagesDir == "" {
		o.imagesDir = filepath.Join(o.store.dataDir, "images")
	}
	log := slog.New(slog.NewTextHandler(std.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	imgs, err := image.Open(o.imagesDir, image.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	st, err := o.store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	c := templates.New(templates.Config{Store: st, Images: imgs, CodeInterpreter: true, Logger: log})
	t, err := c.Resolve(ctx, o.tenantID, tmpl)
	if err != nil {
		return fmt.Errorf("template %s: %w", tmpl, err)
	}
	stored, err := c.Image(ctx, o.tenantID, t.ID)
	if err != nil {
		return fmt.Errorf("template %s: %w", tmpl, err)
	}
	// A lease keeps GC (a daemon's scheduled one) from taking the layers
	// while they upload.
	lease, err := imgs.Lease(ctx)
	if err != nil {
		return err
	}
	defer lease.Release()
	base, err := imgs.V1(ctx, stored.Digest)
	if err != nil {
		return fmt.Errorf("template %s: %w", tmpl, err)
	}
	img, err := podimage.Build(ctx, base, agent)
	if err != nil {
		return fmt.Errorf("template %s: %w", tmpl, err)
	}
	pinned, err := podimage.Push(ctx, img, ref, authn.DefaultKeychain)
	if err != nil {
		return fmt.Errorf("template %s: %w", tmpl, err)
	}
	res := pushed{Template: t.Name, ID: t.ID, Ref: ref, Pinned: pinned.String(), Digest: pinned.DigestStr()}
	if out.structured() {
		return out.print(std.Out, res)
	}
	_, err = fmt.Fprintln(std.Out, res.Pinned)
	return err
}

// podAgentEnv names the static sandlot-pod-agent when none is beside this
// executable (make test sets it).
const podAgentEnv = "SANDLOT_POD_AGENT_BIN"

// agentBinary is --agent, else sandlot-pod-agent beside this executable,
// else $SANDLOT_POD_AGENT_BIN: the pod image's agent, which speaks the pod
// channel's TLS (the local sandboxes' sandlot-agent links none).
func agentBinary(flagPath string) (string, error) {
	if flagPath != "" {
		return flagPath, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "sandlot-pod-agent")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p := os.Getenv(podAgentEnv); p != "" {
		return p, nil
	}
	return "", usageErr("template push: no sandlot-pod-agent beside this binary and $%s unset: name the static pod agent with --agent", podAgentEnv)
}
