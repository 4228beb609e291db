package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/templates"
)

const templateBuildLong = `Builds an image from a Dockerfile (the subset in docs/images.md), or from
the JSON of an E2B Template SDK template (Template.toJSON; -f FILE.json),
into the image store and records it as the template NAME (NAME:TAG for a
tag, latest by default): a public one, or with --tenant that tenant's (a
template of that name and tag it had is replaced). It
works on the store and the image store directly, as the operator. Every
RUN step runs in a sandbox of its own (user namespace, no host paths).
Steps run without network here; builds that need a package mirror go
through the daemon, whose build allowlist reaches it. Needs root and an
OCI runtime, like sandlot run.

With --url (or $SANDLOT_URL set and none of --tenant, --images-dir,
--state-dir, --runtime, --store given) the build goes through that daemon
instead, as the API key's tenant: CONTEXT_DIR is uploaded as a gzip
tarball (POST /v1/templates/builds), the RUN steps run in the daemon's
sandboxes, the build's log streams here as it comes, and a failed build
exits non-zero. Only Dockerfiles build this way; E2B templates build
through the daemon's E2B wire.`

// buildArgs collects --build-arg K=V.
type buildArgs map[string]string

func (b buildArgs) String() string { return "" }
func (b buildArgs) Type() string   { return "NAME=VALUE" }

func (b buildArgs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--build-arg %q: want NAME=VALUE", s)
	}
	b[k] = v
	return nil
}

func newTemplateBuildCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "build -t NAME [-f Dockerfile] [--build-arg K=V]... [--tenant ID] [CONTEXT_DIR]",
		Short: "build a template from a Dockerfile into the store and the image store",
		Long:  templateBuildLong,
		Args:  cobra.MaximumNArgs(1),
		Example: `  sandlot template build -t data-tools .
  sandlot template build -t data-tools -f docker/Dockerfile --build-arg PY=3.11 docker/
  sandlot template build -t data-tools --url http://127.0.0.1:7423 .     # through a daemon
  sandlot template build -t e2b-base -f template.json                    # an E2B template`,
	}
	fs := cmd.Flags()
	var o templateBuildFlags
	fs.StringVarP(&o.name, "tag", "t", "", "name of the built template (required)")
	fs.StringVarP(&o.file, "file", "f", "", "the Dockerfile or E2B template JSON (default CONTEXT_DIR/Dockerfile)")
	o.store.register(fs)
	fs.StringVar(&o.imagesDir, "images-dir", "", "image store (default DATA_DIR/images, serve's)")
	fs.StringVar(&o.tenantID, "tenant", "", "the tenant whose template it is (default: a public template)")
	fs.StringVar(&o.runtime, "runtime", "auto", "OCI runtime: auto, crun, runc or runsc")
	fs.StringVar(&o.stateDir, "state-dir", filepath.Join(oci.DefaultStateDir, "cli-build"), "state directory of the build's sandboxes")
	o.buildArgs = buildArgs{}
	fs.Var(o.buildArgs, "build-arg", "ARG value, NAME=VALUE (repeatable)")
	var r remote
	fs.StringVar(&r.url, "url", "", "build through the daemon at this URL ($"+envURL+"): the context is uploaded, the log streams back")
	fs.StringVar(&r.key, "api-key", "", "with --url: API key (default: $"+envAPIKey+", else the client config's context, else the key file in --data-dir)")
	r.out.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var local []string
		for _, f := range []string{"tenant", "images-dir", "state-dir", "runtime", "store"} {
			if fs.Changed(f) {
				local = append(local, "--"+f)
			}
		}
		remoteMode, err := remoteBuild(fs.Changed("url"), local)
		if err != nil {
			return err
		}
		if remoteMode {
			if o.name == "" {
				return fmt.Errorf("template build: -t NAME is required: %w", errdefs.ErrInvalidArgument)
			}
			contextDir := "."
			if len(args) == 1 {
				contextDir = args[0]
			}
			r.dataDir = o.store.dataDir
			c, err := r.client()
			if err != nil {
				return err
			}
			return templateBuildRemote(cmd.Context(), ioOf(cmd), c, contextDir, o, r.out)
		}
		return templateBuildMain(cmd.Context(), ioOf(cmd), args, o, r.out)
	}
	return cmd
}

// templateBuildFlags are the flags of template build.
type templateBuildFlags struct {
	name, file, imagesDir, tenantID, runtime, stateDir string
	store                                              storeFlags
	buildArgs                                          buildArgs
}

func templateBuildMain(ctx context.Context, io IO, args []string, o templateBuildFlags, out output) error {
	contextDir := "."
	if len(args) == 1 {
		contextDir = args[0]
	}
	if o.name == "" {
		return fmt.Errorf("template build: -t NAME is required: %w", errdefs.ErrInvalidArgument)
	}
	if o.file == "" {
		o.file = filepath.Join(contextDir, "Dockerfile")
	}
	if o.imagesDir == "" {
		o.imagesDir = filepath.Join(o.store.dataDir, "images")
	}
	log := slog.New(slog.NewTextHandler(io.Err, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: export.Milliseconds}))
	s, err := image.Open(o.imagesDir, image.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	st, err := o.store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	p, err := local.New(local.Config{Runtime: o.runtime, StateDir: o.stateDir, Images: s, Logger: log})
	if err != nil {
		return err
	}
	c := templates.New(templates.Config{Store: st, Images: s, Logger: log})
	progress := io.Out
	if out.structured() {
		progress = io.Err // stdout is the result's
	}
	t, err := BuildTemplate(ctx, c, daemon.NewBuilder(p, s, local.BuildConfig{}, true, nil, log), TemplateBuild{
		Tenant: o.tenantID, Name: o.name, Dockerfile: o.file, ContextDir: contextDir, BuildArgs: o.buildArgs, Output: progress,
	})
	if err != nil {
		return err
	}
	if out.structured() {
		at := server.TemplateOut(t)
		return out.print(io.Out, &at)
	}
	fmt.Fprintf(io.Out, "built %s %s %s\n", t.Name, t.ID, t.Image)
	return nil
}

// TemplateBuild is one Dockerfile build.
type TemplateBuild struct {
	Tenant     string            // whose template; "": a public one
	Name       string            // the template's name
	Dockerfile string            // path of the Dockerfile
	ContextDir string            // COPY sources
	BuildArgs  map[string]string // --build-arg
	Output     io.Writer         // progress lines and RUN output; nil discards
}

// BuildTemplate parses req's Dockerfile, builds it with b, printing a line
// per step, and records the image as req.Tenant's template in c. It is the
// CLI's build, apart from its flags.
func BuildTemplate(ctx context.Context, c *templates.Catalog, b *build.Builder, req TemplateBuild) (templates.Template, error) {
	out := req.Output
	if out == nil {
		out = io.Discard
	}
	f, err := os.Open(req.Dockerfile)
	if err != nil {
		return templates.Template{}, fmt.Errorf("dockerfile: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return templates.Template{}, fmt.Errorf("dockerfile: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if len(body) > 1<<20 {
		return templates.Template{}, fmt.Errorf("recipe %s is over 1 MiB: %w", req.Dockerfile, errdefs.ErrInvalidArgument)
	}
	// A recipe is a Dockerfile, or the JSON of E2B's Template SDK
	// (Template.toJSON, what Template.build posts).
	var rec *recipe.Recipe
	source := "dockerfile"
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		if len(req.BuildArgs) > 0 {
			return templates.Template{}, fmt.Errorf("--build-arg applies to a Dockerfile, not an E2B template: %w", errdefs.ErrInvalidArgument)
		}
		rec, err = recipe.ParseE2B(body)
		source = "e2b template"
	} else {
		rec, err = recipe.ParseDockerfile(bytes.NewReader(body), req.BuildArgs)
	}
	if err != nil {
		return templates.Template{}, err
	}
	return c.Build(ctx, req.Tenant, templates.BuildSpec{Name: req.Name, Source: source}, func(ctx context.Context) (build.Result, error) {
		return b.Build(ctx, rec, build.Options{
			ContextDir: req.ContextDir, Output: out,
			// FROM a template name means that template's image; else,
			// the operator's build, a name or digest in the store or a
			// registry reference (the builder's Base).
			Resolve: func(ctx context.Context, ref string) (image.Image, error) {
				img, err := c.Image(ctx, req.Tenant, ref)
				if errors.Is(err, errdefs.ErrNotFound) {
					return b.Base(ctx, ref, rec.Steps[0].RegistryAuth)
				}
				return img, err
			},
			Tenant:   req.Tenant,
			Progress: func(s build.Step) { fmt.Fprintf(out, "[%d/%d] %s\n", s.Index, s.Of, s.Text) },
		})
	})
}
